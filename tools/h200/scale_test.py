"""Tests of the issue-19 comparison (scale-compare.py), the cost probe's
collector config (scale-cost.py) and scale-run.sh's plan, on synthetic
inputs: python3 -m unittest tools/h200/scale_test.py (from the repository
root, or discover in tools/h200). No GPU needed."""
import importlib.util
import io
import json
import os
import shutil
import stat
import subprocess
import tempfile
import unittest
from contextlib import redirect_stdout

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))


def load(name, file):
    spec = importlib.util.spec_from_file_location(name, os.path.join(HERE, file))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


sc = load("scale_compare", "scale-compare.py")
scost = load("scale_cost", "scale-cost.py")

S = 10 ** 9
T0 = 1_796_000_000 * S  # the truth window's start (unix ns)
UUIDS = {0: "GPU-7a676e63-4614-7414-4081-66c427a634c5", 1: "GPU-ecdad917-60bd-e0a2-3800-5218d868c814"}


def sv(s):
    return {"stringValue": s}


def attrs(d):
    out = []
    for k, v in d.items():
        out.append({"key": k, "value": {"intValue": str(v)} if isinstance(v, int) else sv(v)})
    return out


def gauge(name, v, t, a=None):
    return {"name": name, "gauge": {"dataPoints": [{"timeUnixNano": str(t), "asDouble": v, "attributes": attrs(a or {})}]}}


def total(name, v, t, start, a=None, as_int=False):
    dp = {"timeUnixNano": str(t), "startTimeUnixNano": str(start), "attributes": attrs(a or {})}
    dp["asInt" if as_int else "asDouble"] = str(int(v)) if as_int else v
    return {"name": name, "sum": {"dataPoints": [dp]}}


class Run:
    """A synthetic scale-run.sh run directory: GPU 0 the matmul, GPU 1 the
    spinning block, 2 holders each; every figure as the truth says, unless
    a test changes one of the knobs."""

    def __init__(self, root):
        self.dir = root
        self.util = {0: 0.48, 1: 0.995}
        self.sm = {0: 0.44, 1: 0.0076}
        self.held_rate = {0: 1.0, 1: 1.0}
        self.hw_id = dict(UUIDS)
        self.mem_mib = {100: 4612.0, 101: 762.0, 102: 762.0, 200: 506.0, 201: 762.0, 202: 762.0}
        self.smi_mem_delta = {}  # pid -> MiB added to nvidia-smi's reading
        self.energy_drop_at = None  # (gpu, second) where energy goes down
        self.drop_pid = None  # a pid the receiver does not report
        self.loads = {0: ("matmul", 100, [101, 102]), 1: ("spin", 200, [201, 202])}

    def write_truth(self, tag=""):
        """truth{tag}-*; the loads in truth{tag}-loads.txt (and loads.txt)."""
        j = lambda n: os.path.join(self.dir, n)  # noqa: E731
        with open(j("uuids.csv"), "w") as f:
            for i in self.loads:
                f.write("%d, %s\n" % (i, UUIDS[i]))
        for name in ("loads.txt", "truth%s-loads.txt" % tag):
            if name == "loads.txt" and tag:
                continue
            with open(j(name), "w") as f:
                for i, (kind, pid, holders) in self.loads.items():
                    f.write("%d %s %d\n" % (i, kind, pid))
                    for h in holders:
                        f.write("%d holder %d\n" % (i, h))
        with open(j("run.json"), "w") as f:
            json.dump({"gpus": 2, "part": "all", "load_order": "matmul-first", "holders": 2, "hold_mib": 256}, f)
        with open(j("truth%s-window.txt" % tag), "w") as f:
            f.write("%d %d\n" % (T0, T0 + 45 * S))
        with open(j("truth%s-apps.csv" % tag), "w") as f:
            for k in range(0, 45, 5):
                for i, (_, pid, holders) in self.loads.items():
                    for p in [pid] + holders:
                        f.write("%d, %s, %d, %.0f\n" % (T0 + k * S, UUIDS[i], p, self.mem_mib[p] + self.smi_mem_delta.get(p, 0)))
        start = T0 - 6 * S
        with open(j("truth%s-metrics.jsonl" % tag), "w") as f:
            for k in range(-5, 47):
                t = T0 + k * S
                el = (t - start) / S
                rms = []
                for i, (kind, pid, holders) in self.loads.items():
                    idle = 1.0 if self.sm[i] < 0.05 else 0.0
                    ms = [gauge("hw.gpu.utilization", self.util[i], t, {"hw.gpu.task": "general"}),
                          gauge("nvidia.gpu.sm.activity", self.sm[i], t),
                          total("nvidia.gpu.held.time", self.held_rate[i] * el, t, start),
                          total("nvidia.gpu.busy.time", self.util[i] * el, t, start),
                          total("nvidia.gpu.active.time", self.sm[i] * el, t, start),
                          total("nvidia.gpu.idle.time", idle * el, t, start)]
                    if k % 10 == 0:
                        e = 500.0 * el
                        if self.energy_drop_at == (i, k):
                            e -= 10000
                        ms.append(total("hw.energy", e, t, start))
                    rms.append({"resource": {"attributes": attrs({"hw.id": self.hw_id[i], "nvidia.gpu.index": i, "hw.type": "gpu"})},
                                "scopeMetrics": [{"metrics": ms}]})
                    for p in [pid] + holders:
                        if p == self.drop_pid:
                            continue
                        busy = self.util[i] if p == pid else 0.0
                        pm = [total("nvidia.gpu.process.memory.usage", self.mem_mib[p] * 2 ** 20, t, start, as_int=True),
                              total("nvidia.gpu.process.held.time", el, t, start),
                              total("nvidia.gpu.process.busy.time", busy * el, t, start)]
                        rms.append({"resource": {"attributes": attrs({"hw.id": self.hw_id[i], "nvidia.gpu.index": i,
                                                                      "process.pid": p})},
                                    "scopeMetrics": [{"metrics": pm}]})
                f.write(json.dumps({"resourceMetrics": rms}) + "\n")

    def write_cost(self, cpu, wall_p50, counts=(1, 2), smi_cpu=(24.0, 26.0), with_wall=True, traces_cpu=0.3):
        """cpu, wall_p50: functions of n (ms per second, ms per scrape)."""
        spans = []
        for k, n in enumerate(counts):
            w0 = T0 + k * 100 * S
            w1 = w0 + 60 * S
            cost = {"devices": [str(i) for i in range(n)], "window_ns": [w0, w1], "seconds": 60.0,
                    "cpu_ms_per_s": cpu(n), "cpu_ms_each_s": [cpu(n)] * 59 + [cpu(n) * 3],
                    "rss_mib_end": 77 + n, "rss_mib_max": 78 + n, "memory": {"RssAnon": 20000, "RssFile": 60000},
                    "exit": 0}
            with open(os.path.join(self.dir, "cost-n%d.json" % n), "w") as f:
                json.dump(cost, f)
            if with_wall:  # the wall run: its own window, in the sink's spans
                with open(os.path.join(self.dir, "wall-n%d.json" % n), "w") as f:
                    json.dump(dict(cost, cpu_ms_per_s=cpu(n) + traces_cpu), f)
            with open(os.path.join(self.dir, "smi-n%d.json" % n), "w") as f:
                json.dump({"cpu_ms_p50": smi_cpu[0] + smi_cpu[1] * (n - 1) * 0, "wall_ms_p50": 30.0, "fields": 15}, f)
            for s in range(60):
                b = w0 + s * S + S // 2
                wall = wall_p50(n) * (4 if s == 59 else 1)
                spans.append({"name": sc.SPAN_NAME, "startTimeUnixNano": str(b), "endTimeUnixNano": str(b + int(wall * 1e6))})
            # a span of another run, outside the window: left out
            spans.append({"name": sc.SPAN_NAME, "startTimeUnixNano": str(w1 + 5 * S), "endTimeUnixNano": str(w1 + 6 * S)})
            spans.append({"name": "exporter/debug/metrics", "startTimeUnixNano": str(w0 + S), "endTimeUnixNano": str(w0 + 9 * S)})
        with open(os.path.join(self.dir, "spans.jsonl"), "w") as f:
            for i in range(0, len(spans), 7):
                f.write(json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": spans[i:i + 7]}]}]}) + "\n")
        with open(os.path.join(self.dir, "receivercost.json"), "w") as f:
            json.dump({"gpus": max(counts), "wall_ms_p50": 3.8, "wall_ms_p99": 6.7, "cpu_ms_p50": 4.2, "cpu_ms_p99": 8.2,
                       "cpu_ms_per_scrape_all": 5.4, "scrapes": 40, "interval_ms": 500}, f)


def read(path):
    with open(path) as f:
        return f.read()


def results(res):
    return {(i, c["check"]): c["ok"] for i, g in res["truth"]["gpus"].items() for c in g["checks"] if not c.get("info")}


def failed(res):
    return sorted(k for k, ok in results(res).items() if not ok)


class TruthTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp()
        self.run = Run(self.tmp)

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def analyse(self):
        self.run.write_truth()
        return sc.analyse([self.tmp], REPO)

    def failed_checks(self):
        return [(i, name.split(" ")[0]) for i, name in failed(self.analyse())]

    def test_every_truth_passes(self):
        res = self.analyse()
        self.assertEqual(failed(res), [])
        self.assertEqual(len(results(res)), 2 * 7)
        self.assertEqual(res["truth"]["gpus"][1]["load"], "spin")
        self.assertAlmostEqual(res["truth"]["window_s"], 42.0)

    def test_wrong_hw_id(self):
        self.run.hw_id[1] = UUIDS[0]
        self.assertEqual(self.failed_checks(), [(1, "hw.id")])

    def test_utilization_off_by_more_than_005(self):
        self.run.util[0] = 0.56  # the busy counter follows, so only the truth fails
        self.assertEqual(self.failed_checks(), [(0, "windowed")])

    def test_spin_with_sm_activity_over_002(self):
        self.run.sm[1] = 0.03
        self.assertEqual(self.failed_checks(), [(1, "SM")])

    def test_matmul_sm_activity_out_of_range(self):
        self.run.sm[0] = 0.30
        self.assertEqual(self.failed_checks(), [(0, "SM")])

    def test_process_memory_differs_by_2_mib(self):
        self.run.smi_mem_delta[101] = 2
        self.assertEqual(self.failed_checks(), [(0, "process")])

    def test_process_memory_within_the_mib(self):
        self.run.mem_mib[202] = 762.4  # nvidia-smi prints 762
        self.assertEqual(self.failed_checks(), [])

    def test_process_missing_from_the_receiver(self):
        self.run.drop_pid = 201  # also no held time for that holder
        self.assertEqual(self.failed_checks(), [(1, "each"), (1, "process")])

    def test_holders_busy_is_reported_not_judged(self):
        self.run.util[0] = 0.48
        res = self.analyse()
        info = [c for c in res["truth"]["gpus"][0]["checks"] if c.get("info")]
        self.assertEqual(len(info), 1)
        self.assertIn("max 0.000, sum 0.000 over 2 holders; the load's 0.480", info[0]["detail"])

    def test_energy_goes_down(self):
        self.run.energy_drop_at = (0, 30)
        self.assertEqual(self.failed_checks(), [(0, "energy")])

    def test_held_rate_not_1(self):
        self.run.held_rate[1] = 0.9
        self.assertEqual(self.failed_checks(), [(1, "waste")])

    def test_report_and_exit_status(self):
        self.run.write_truth()
        with redirect_stdout(io.StringIO()):
            self.assertEqual(sc.main([self.tmp]), 0)
        md = read(os.path.join(self.tmp, "scale.md"))
        self.assertIn("Truths: PASS (0 of 14 checks failed)", md)
        self.assertIn("Cost: not in these runs", md)
        json.loads(read(os.path.join(self.tmp, "scale.json")))
        self.run.util[1] = 0.8
        self.run.write_truth()
        with redirect_stdout(io.StringIO()):
            self.assertEqual(sc.main([self.tmp]), 1)
        self.assertIn("| 1 | spin | windowed utilization within 0.05 of the truth | FAIL |",
                      read(os.path.join(self.tmp, "scale.md")))

    def test_one_gpu_both_loads_through_the_swap(self):
        # One GPU: the matmul first, then the spinning block in its place.
        self.run.loads = {0: ("matmul", 100, [101, 102])}
        self.run.write_truth()
        res = sc.analyse([self.tmp], REPO)
        self.assertIn("No GPU ran the spinning block", sc.render(res))
        self.run.loads = {0: ("spin", 300, [101, 102])}
        self.run.util[0], self.run.sm[0], self.run.mem_mib[300] = 0.995, 0.0076, 506.0
        self.run.write_truth("-swap")
        res = sc.analyse([self.tmp], REPO)
        self.assertEqual(res["truth"]["gpus"][0]["load"], "matmul")
        self.assertEqual(res["truth_swap"]["gpus"][0]["load"], "spin")
        self.assertEqual(sc.truth_failures(res), [])
        md = sc.render(res)
        self.assertNotIn("No GPU ran", md)
        self.assertIn("Truths (swapped loads): PASS (0 of 7 checks failed)", md)
        self.run.sm[0] = 0.05
        self.run.write_truth("-swap")
        self.assertEqual(sc.truth_failures(sc.analyse([self.tmp], REPO)),
                         [("truth_swap", 0, "SM activity under 0.02 for one spinning block")])

    def test_nothing_to_read(self):
        with redirect_stdout(io.StringIO()):
            self.assertEqual(sc.main(["--out", self.tmp, os.path.join(self.tmp, "absent")]), 2)


class CostTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp()
        self.run = Run(self.tmp)

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def test_rows_from_cost_files_and_spans(self):
        self.run.write_cost(lambda n: 5.6 * n, lambda n: 3.8 * n, counts=(1, 2, 4, 8))
        res = sc.analyse([self.tmp], REPO)
        rows = res["rows"]
        self.assertEqual(sorted(rows), [1, 2, 4, 8])
        r = rows[4]
        self.assertEqual(r["scrapes"], 60)  # the other runs' spans and the exporter's are left out
        self.assertAlmostEqual(r["wall_ms_p50"], 15.2, places=3)
        self.assertAlmostEqual(r["wall_ms_p99"], 60.8, places=3)  # the one slow scrape of 60
        self.assertAlmostEqual(r["cpu_ms_each_s_p99"], 5.6 * 4 * 3, places=3)
        self.assertTrue(res["linearity"]["collector_cpu"]["verdict"].startswith("linear:"))
        self.assertAlmostEqual(res["linearity"]["collector_cpu"]["slope_per_gpu"], 5.6)
        sv = res["scrape_vs_timeout"]
        self.assertFalse(sv["exceeds_quarter_of_default"])  # 486 ms < 2.5 s
        self.assertNotIn("p99_8_extrapolated_ms", sv)
        md = sc.render(res)
        self.assertIn("| 8 | 44.80 | 5.60 |", md)
        self.assertIn("Default `timeout`: 10s", md)
        self.assertIn("is well inside", md)

    def test_the_traces_own_cost(self):
        self.run.write_cost(lambda n: 5.8 * n, lambda n: 3.8 * n, counts=(1, 2), traces_cpu=0.3)
        res = sc.analyse([self.tmp], REPO)
        self.assertAlmostEqual(res["rows"][2]["cpu_ms_per_s"], 11.6)  # from the cost run, not the traced one
        self.assertAlmostEqual(res["rows"][2]["cpu_ms_per_s_traced"], 11.9)
        self.assertIn("The traces themselves (wall runs against cost runs): 0.30 ms/s more CPU on average, within",
                      sc.render(res))

    def test_cost_without_wall_and_wall_from_another_call(self):
        a, b = os.path.join(self.tmp, "call1"), os.path.join(self.tmp, "call2")
        os.makedirs(a)
        os.makedirs(b)
        Run(a).write_cost(lambda n: 5.8 * n, lambda n: 3.8 * n, with_wall=False)
        res = sc.analyse([a], REPO)
        self.assertIn("no wall run", sc.render(res))
        self.assertNotIn("max_n", res["scrape_vs_timeout"])
        Run(b).write_cost(lambda n: 9.9 * n, lambda n: 3.8 * n)
        os.remove(os.path.join(b, "cost-n1.json"))
        os.remove(os.path.join(b, "cost-n2.json"))
        res = sc.analyse([a, b], REPO)
        self.assertEqual(res["cost"]["from"], a)
        self.assertEqual(res["wall"]["from"], b)
        self.assertAlmostEqual(res["rows"][2]["cpu_ms_per_s"], 11.6)
        self.assertAlmostEqual(res["rows"][2]["wall_ms_p50"], 7.6, places=3)

    def test_one_gpu_extrapolates_to_8(self):
        self.run.write_cost(lambda n: 5.6, lambda n: 100.0, counts=(1,))
        res = sc.analyse([self.tmp], REPO)
        self.assertIn("not measurable", res["linearity"]["collector_cpu"]["verdict"])
        sv = res["scrape_vs_timeout"]
        self.assertAlmostEqual(sv["p99_8_extrapolated_ms"], 3200.0)  # 400 ms p99 x 8
        self.assertTrue(sv["exceeds_quarter_extrapolated"])
        self.assertFalse(sv["exceeds_quarter_of_default"])
        self.assertIn("extrapolated (not measured", sc.render(res))

    def test_p99_over_a_quarter_of_the_timeout(self):
        self.run.write_cost(lambda n: 5.6 * n, lambda n: 100.0 * n, counts=(1, 8))
        sv = sc.analyse([self.tmp], REPO)["scrape_vs_timeout"]
        self.assertTrue(sv["exceeds_quarter_of_default"])  # 3.2 s > 2.5 s
        self.assertIn("EXCEEDS", sc.render(sc.analyse([self.tmp], REPO)))

    def test_merge_cost_and_truth_from_two_calls(self):
        a, b = os.path.join(self.tmp, "cost"), os.path.join(self.tmp, "truth")
        os.makedirs(a)
        os.makedirs(b)
        Run(a).write_cost(lambda n: 5.6 * n, lambda n: 3.8 * n)
        Run(b).write_truth()
        with redirect_stdout(io.StringIO()):
            self.assertEqual(sc.main(["--out", self.tmp, a, b]), 0)
        res = json.loads(read(os.path.join(self.tmp, "scale.json")))
        self.assertEqual(res["cost"]["from"], a)
        self.assertEqual(res["truth"]["from"], b)


class LinearityTest(unittest.TestCase):
    def test_linear(self):
        v = sc.linearity({1: 5.6, 2: 11.0, 4: 23.0, 8: 44.0})["verdict"]
        self.assertTrue(v.startswith("linear:"), v)

    def test_super_linear(self):
        v = sc.linearity({1: 5.0, 2: 12.0, 4: 40.0, 8: 160.0})["verdict"]
        self.assertTrue(v.startswith("NOT linear (super-linear)"), v)

    def test_fixed_part_plus_slope(self):
        l = sc.linearity({n: 3.0 + 2.0 * n for n in (1, 2, 4, 8)})
        self.assertTrue(l["verdict"].startswith("linear with a fixed part"), l["verdict"])
        self.assertAlmostEqual(l["intercept"], 3.0)
        self.assertAlmostEqual(l["slope_per_gpu"], 2.0)

    def test_flat_does_not_grow(self):
        v = sc.linearity({1: 5.0, 2: 9.5, 4: 6.0, 8: 5.5})["verdict"]
        self.assertTrue(v.startswith("does not grow"), v)

    def test_irregular_is_not_linear(self):
        v = sc.linearity({1: 10.0, 2: 11.0, 4: 30.0, 8: 32.0})["verdict"]
        self.assertTrue(v.startswith("NOT linear (sub-linear"), v)

    def test_falling_is_not_growth(self):
        v = sc.linearity({1: 60.0, 2: 53.0})["verdict"]
        self.assertTrue(v.startswith("does not grow"), v)

    def test_two_counts_cannot_vouch_for_a_fit(self):
        v = sc.linearity({1: 5.0, 2: 6.0})["verdict"]
        self.assertTrue(v.startswith("grows less than linearly (per GPU 0.60x"), v)
        self.assertTrue(sc.linearity({1: 5.0, 2: 9.0})["verdict"].startswith("linear:"))
        self.assertIn("super-linear", sc.linearity({1: 5.0, 2: 14.0})["verdict"])

    def test_one_count(self):
        self.assertIn("not measurable", sc.linearity({1: 5.0})["verdict"])


class TimeoutTest(unittest.TestCase):
    def test_the_repositorys_default(self):
        t = sc.default_timeout(REPO)
        self.assertNotIn("error", t)
        self.assertEqual(t["timeout_s"], 0)
        self.assertEqual(t["effective_s"], t["collection_interval_s"])
        self.assertGreater(t["effective_s"], 0)

    def test_an_explicit_timeout_and_a_changed_source(self):
        tmp = tempfile.mkdtemp()
        try:
            d = os.path.join(tmp, "receiver/nvmlreceiver")
            os.makedirs(d)
            with open(os.path.join(d, "factory.go"), "w") as f:
                f.write("cc.CollectionInterval = 10 * time.Second\n\tcc.Timeout = 3 * time.Second\n")
            with open(os.path.join(d, "config.go"), "w") as f:
                f.write("// nothing\n")
            self.assertEqual(sc.default_timeout(tmp)["effective_s"], 3.0)
            with open(os.path.join(d, "factory.go"), "w") as f:
                f.write("cc.CollectionInterval = 500 * time.Millisecond\n")
            self.assertIn("error", sc.default_timeout(tmp))  # 0 no longer documented as the interval
            with open(os.path.join(d, "config.go"), "w") as f:
                f.write('"timeout: %v must not be negative (0 means the collection interval)"\n')
            self.assertEqual(sc.default_timeout(tmp)["effective_s"], 0.5)
        finally:
            shutil.rmtree(tmp)


class CollectorConfigTest(unittest.TestCase):
    def test_devices_and_traces(self):
        cfg = scost.collector_config(["0", "1", "2"], "127.0.0.1:14399")
        self.assertIn('    collection_interval: 1s\n    devices: ["0", "1", "2"]\n', cfg)
        self.assertIn("      level: none\n    traces:\n      processors:\n", cfg)
        self.assertIn("endpoint: http://127.0.0.1:14399", cfg)
        self.assertIn("exporters: [debug]", cfg)
        self.assertNotIn("library_path", cfg)
        plain = scost.collector_config(["0"], "")
        self.assertNotIn("traces", plain)
        self.assertIn('devices: ["0"]', plain)

    def test_sink(self):
        cfg = scost.sink_config("127.0.0.1:14399", "/x/spans.jsonl")
        self.assertIn("path: /x/spans.jsonl", cfg)
        self.assertIn("traces:\n      receivers: [otlp]\n      exporters: [file]", cfg)


class PlanTest(unittest.TestCase):
    """scale-run.sh's plan, with an nvidia-smi that lists N GPUs."""

    def plan(self, n, **env):
        tmp = tempfile.mkdtemp()
        try:
            smi = os.path.join(tmp, "nvidia-smi")
            with open(smi, "w") as f:
                f.write("#!/bin/sh\nseq 0 %d\n" % (n - 1))
            os.chmod(smi, os.stat(smi).st_mode | stat.S_IEXEC)
            e = dict(os.environ, PATH=tmp + os.pathsep + os.environ["PATH"], OUT=os.path.join(tmp, "out"), PLAN_ONLY="1",
                     **env)
            p = subprocess.run(["bash", os.path.join(HERE, "scale-run.sh")], env=e, capture_output=True, text=True,
                               timeout=30)
            self.assertEqual(p.returncode, 0, p.stderr)
            return p.stdout
        finally:
            shutil.rmtree(tmp)

    @staticmethod
    def seconds(out, key):
        import re
        return int(re.search(key + r" ~(\d+) s", out).group(1))

    def test_one_gpu_one_call(self):
        out = self.plan(1)
        self.assertIn("counts: 1;", out)
        self.assertIn("this call: PART=all (cost,wall,truth)", out)
        self.assertLessEqual(self.seconds(out, r"\(PART=all\):"), 540)

    def test_eight_gpus_two_calls(self):
        out = self.plan(8)
        self.assertIn("counts: 1 2 4 8;", out)
        self.assertLessEqual(self.seconds(out, "PART=cost"), 600)
        self.assertLessEqual(self.seconds(out, "PART=wall,truth"), 600)
        self.assertIn("this call: PART=cost\n", out)

    def test_six_gpus_measure_six_too(self):
        self.assertIn("counts: 1 2 4 6;", self.plan(6))


if __name__ == "__main__":
    unittest.main()
