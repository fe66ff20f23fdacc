"""Tests of compare.py's limit checks (max SM and memory clocks, max PCIe
generation and width against one nvidia-smi query) on synthetic inputs:
python3 -m unittest tools/h200/compare_test.py (from the repository root).
No GPU needed. Matching data passes; a value off, or a metric absent from
metrics.jsonl, fails naming it; an nvidia-smi [N/A] or [Not Supported] skips
that check with the reason."""
import importlib.util
import io
import json
import os
import tempfile
import unittest
from contextlib import redirect_stdout
from datetime import datetime
from unittest import mock

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("compare", os.path.join(HERE, "compare.py"))
cmp = importlib.util.module_from_spec(spec)
spec.loader.exec_module(cmp)

S = 10 ** 9
T0 = 1_800_000_000
UUID = "GPU-00000000-0000-4000-8000-00000000a200"
# An H200 SXM on a Gen5 x16 slot, under load (the link at its max).
LIMITS = {"clocks.max.sm": "1980", "clocks.max.memory": "3201", "pcie.link.gen.max": "5",
          "pcie.link.width.max": "16", "pcie.link.gen.gpucurrent": "5", "pcie.link.width.current": "16"}
MEM_MIB, POWER_W = 9000, 400.0


def point(v, t, **attrs):
    dp = {"timeUnixNano": str(int(t * S)), "startTimeUnixNano": str(T0 * S)}
    if isinstance(v, int):
        dp["asInt"] = str(v)
    else:
        dp["asDouble"] = v
    if attrs:
        dp["attributes"] = [{"key": k, "value": {"stringValue": a}} for k, a in attrs.items()]
    return dp


def gauge(name, unit, *points):
    return {"name": name, "unit": unit, "gauge": {"dataPoints": list(points)}}


def scrape(t, drop=(), sm_hz=1_980_000_000):
    """One export of the file exporter at t seconds: the GPU's device
    resource (hw.id = UUID) with memory, power and temperatures that match
    smi.csv, and, the limits read on
    the counters' cadence, the three new metrics; names in drop left out."""
    ms = [{"name": "hw.gpu.memory.usage", "unit": "By",
           "sum": {"aggregationTemporality": 2, "dataPoints": [point(MEM_MIB << 20, T0 + t)]}},
          gauge("hw.power", "W", point(POWER_W, T0 + t)),
          gauge("hw.temperature", "Cel", point(45.0, T0 + t, **{"hw.sensor_location": "gpu"}),
                point(50.0, T0 + t, **{"hw.sensor_location": "memory"})),
          gauge("nvidia.gpu.clock.max_frequency", "Hz",
                point(3_201_000_000, T0 + t, **{"nvidia.gpu.clock.type": "memory"}),
                point(sm_hz, T0 + t, **{"nvidia.gpu.clock.type": "sm"})),
          gauge("nvidia.gpu.pcie.link.max_generation", "{generation}", point(5, T0 + t)),
          gauge("nvidia.gpu.pcie.link.max_width", "{lane}", point(16, T0 + t)),
          gauge("nvidia.gpu.pcie.link.generation", "{generation}", point(5, T0 + t)),
          gauge("nvidia.gpu.pcie.link.width", "{lane}", point(16, T0 + t))]
    ms = [m for m in ms if m["name"] not in drop]
    return {"resourceMetrics": [{
        "resource": {"attributes": [{"key": "hw.id", "value": {"stringValue": UUID}},
                                    {"key": "hw.type", "value": {"stringValue": "gpu"}}]},
        "scopeMetrics": [{"scope": {"name": "otelcol-nvml"}, "metrics": ms}]}]}


def limits_row(**over):
    cells = dict(LIMITS)
    cells.update({k.replace("_", "."): v for k, v in over.items()})
    return ", ".join([UUID] + [cells[f] for f in cmp.LIMIT_FIELDS[1:]]) + "\n"


def fabricate(d, drop=(), sm_hz=1_980_000_000, limits=None):
    """A run's files in d; returns compare.py's arguments ("" for
    processes.txt and prometheus.txt: those checks off)."""
    paths = {n: os.path.join(d, n) for n in ("metrics.jsonl", "smi.csv", "uuids.txt", "limits.csv")}
    with open(paths["metrics.jsonl"], "w") as f:
        for t in range(2, 33, 2):  # 2 s scrapes over a 32 s run
            f.write(json.dumps(scrape(t, drop, sm_hz)) + "\n")
    with open(paths["smi.csv"], "w") as f:
        for t in range(0, 33):
            ts = datetime.fromtimestamp(T0 + t).strftime("%Y/%m/%d %H:%M:%S.000")
            f.write("%s, %s, %d, %.2f, 50, 45, 50\n" % (ts, UUID, MEM_MIB, POWER_W))
    with open(paths["uuids.txt"], "w") as f:
        f.write(UUID + "\n")
    with open(paths["limits.csv"], "w") as f:
        f.write(limits if limits is not None else limits_row())
    return [paths["metrics.jsonl"], paths["smi.csv"], paths["uuids.txt"], "", "", paths["limits.csv"]]


def run(args):
    """compare.py's exit code and output."""
    out = io.StringIO()
    argv = ["compare.py"] + args
    with mock.patch("sys.argv", argv), redirect_stdout(out):
        rc = cmp.main()
    return rc, out.getvalue()


def limit_lines(text):
    return [l.strip() for l in text.splitlines() if l.strip().startswith(("PASS ", "FAIL ", "SKIP "))]


class LimitsTest(unittest.TestCase):
    def go(self, **kw):
        with tempfile.TemporaryDirectory() as d:
            return run(fabricate(d, **kw))

    def test_matching_passes(self):
        rc, out = self.go()
        lines = limit_lines(out)
        self.assertEqual(len(lines), 6, out)
        self.assertTrue(all(l.startswith("PASS ") for l in lines), out)
        self.assertIn("PASS nvidia.gpu.clock.max_frequency{nvidia.gpu.clock.type=sm} = 1980000000 Hz", out)
        self.assertIn("PASS nvidia.gpu.clock.max_frequency{nvidia.gpu.clock.type=memory} = 3201000000 Hz", out)
        self.assertIn("PASS nvidia.gpu.pcie.link.max_generation = 5 {generation}", out)
        self.assertIn("PASS nvidia.gpu.pcie.link.max_width = 16 {lane}", out)
        self.assertIn("RESULT: PASS", out)
        self.assertEqual(rc, 0)

    def test_clock_mismatch_fails(self):
        # 1 MHz off: Hz must be MHz x 1e6 exactly.
        rc, out = self.go(sm_hz=1_981_000_000)
        self.assertIn("FAIL nvidia.gpu.clock.max_frequency{nvidia.gpu.clock.type=sm}: receiver 1981000000 Hz, "
                      "nvidia-smi clocks.max.sm 1980000000 Hz", out)
        self.assertIn("RESULT: FAIL", out)
        self.assertEqual(rc, 1)

    def test_width_mismatch_fails(self):
        # A link that trained down to x8 on a slot nvidia-smi says is x16 max.
        rc, out = self.go(limits=limits_row(pcie_link_width_max="8", pcie_link_width_current="8"))
        self.assertIn("FAIL nvidia.gpu.pcie.link.max_width: receiver 16 {lane}, nvidia-smi pcie.link.width.max 8", out)
        self.assertEqual(rc, 1)

    def test_max_below_current_fails(self):
        rc, out = self.go(limits=limits_row(pcie_link_gen_gpucurrent="6"))
        self.assertTrue(any(l.startswith("FAIL nvidia.gpu.pcie.link.max_generation 5 {generation} >= current")
                            for l in limit_lines(out)), out)
        self.assertEqual(rc, 1)

    def test_missing_metric_fails_naming_it(self):
        rc, out = self.go(drop=("nvidia.gpu.pcie.link.max_width",))
        self.assertIn("FAIL nvidia.gpu.pcie.link.max_width: absent from metrics.jsonl", out)
        self.assertIn("PASS nvidia.gpu.pcie.link.max_generation = 5", out)
        self.assertIn("RESULT: FAIL", out)
        self.assertEqual(rc, 1)

    def test_missing_clock_metric_fails_naming_both_domains(self):
        rc, out = self.go(drop=("nvidia.gpu.clock.max_frequency",))
        self.assertIn("FAIL nvidia.gpu.clock.max_frequency{nvidia.gpu.clock.type=sm}: absent from metrics.jsonl", out)
        self.assertIn("FAIL nvidia.gpu.clock.max_frequency{nvidia.gpu.clock.type=memory}: absent from metrics.jsonl", out)
        self.assertEqual(rc, 1)

    def test_na_skips_with_reason(self):
        rc, out = self.go(limits=limits_row(clocks_max_memory="[N/A]", pcie_link_gen_gpucurrent="[Not Supported]"))
        self.assertIn("SKIP nvidia.gpu.clock.max_frequency{nvidia.gpu.clock.type=memory}: clocks.max.memory, "
                      "nvidia-smi answers '[N/A]'", out)
        self.assertIn("SKIP nvidia.gpu.pcie.link.max_generation >= current: pcie.link.gen.gpucurrent, "
                      "nvidia-smi answers '[Not Supported]'", out)
        self.assertFalse(any(l.startswith("FAIL ") for l in limit_lines(out)), out)
        self.assertIn("RESULT: PASS", out)
        self.assertEqual(rc, 0)

    def test_na_and_absent_skips(self):
        # Where nvidia-smi cannot read it, the receiver exporting nothing is not a failure.
        rc, out = self.go(drop=("nvidia.gpu.pcie.link.max_width",),
                          limits=limits_row(pcie_link_width_max="[N/A]", pcie_link_width_current="[N/A]"))
        self.assertIn("SKIP nvidia.gpu.pcie.link.max_width: pcie.link.width.max, nvidia-smi answers '[N/A]' "
                      "(receiver: no points)", out)
        self.assertEqual(rc, 0, out)

    def test_no_row_fails(self):
        # nvidia-smi rejected the query: its error, no row for the GPU.
        rc, out = self.go(limits='Field "pcie.link.gen.gpucurrent" is not a valid field to query.\n')
        self.assertIn("FAIL limits: no nvidia-smi row for this GPU in limits.csv", out)
        self.assertEqual(rc, 1)

    def test_no_limits_file_fails(self):
        with tempfile.TemporaryDirectory() as d:
            args = fabricate(d)
            os.remove(args[-1])
            rc, out = run(args)
        self.assertIn("FAIL limits: no nvidia-smi row", out)
        self.assertEqual(rc, 1)

    def test_check_limits_directly(self):
        series = {"nvidia.gpu.clock.max_frequency{nvidia.gpu.clock.type=sm}": [(1.0, 1980e6), (11.0, 1980e6)],
                  "nvidia.gpu.clock.max_frequency{nvidia.gpu.clock.type=memory}": [(1.0, 3201e6)],
                  "nvidia.gpu.pcie.link.max_generation": [(1.0, 5.0)],
                  "nvidia.gpu.pcie.link.max_width": [(1.0, 16.0)]}
        got = cmp.check_limits(series, dict(LIMITS))
        self.assertEqual([s for s, _ in got], ["PASS"] * 6, got)
        # A static limit that changes between reads is not one.
        series["nvidia.gpu.pcie.link.max_width"].append((11.0, 8.0))
        got = cmp.check_limits(series, dict(LIMITS))
        self.assertIn(("FAIL", "nvidia.gpu.pcie.link.max_width: receiver 8, 16 {lane}, nvidia-smi pcie.link.width.max 16 {lane}"),
                      got)


if __name__ == "__main__":
    unittest.main()
