"""Tests of the no-limit diagnosis comparison (nolimit-compare.py) on a
synthetic run: python3 -m unittest tools/h200/nolimit_test.py (from the
repository root, or discover in tools/h200). No GPU needed; the states need
promtool (skipped without it)."""
import importlib.util
import io
import json
import os
import shutil
import tempfile
import unittest
from contextlib import redirect_stdout
from unittest import mock

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("nolimit_compare", os.path.join(HERE, "nolimit-compare.py"))
nc = importlib.util.module_from_spec(spec)
spec.loader.exec_module(nc)

S = 10 ** 9
T0 = 1_800_000_000 * S
UUID = "GPU-00000000-0000-4000-8000-00000000a200"
# phase -> (pid, the process's CPU in cores, SM activity, busy): the known
# truths nolimit-run.sh's phases are expected to read.
PHASES = {"loader": (101, 1.0, 0.03, 0.04), "batch50": (102, 1.0, 0.965, 1.0),
          "sync1": (103, 1.0, 0.56, 0.93), "sleep": (104, 0.0, 0.0, 0.0)}
SECONDS = 40


def attrs(**kv):
    return [{"key": k.replace("_", "."), "value": {"intValue": str(v)} if isinstance(v, int) else {"stringValue": v}}
            for k, v in kv.items()]


def point(t, v, start=None, **kv):
    p = {"timeUnixNano": str(t), "asDouble": v, "attributes": attrs(**kv)}
    if start is not None:
        p["startTimeUnixNano"] = str(start)
    return p


def write_run(run_dir):
    """metrics.jsonl (1 s scrapes, as the file exporter writes them) and
    phases.txt: the phases back to back, 5 s apart."""
    held = busy = active = 0.0
    lines, phases = [], ["# phase start_ns end_ns role=pid ... (synthetic)"]
    t = T0
    for name, (pid, cpu, sm, b) in PHASES.items():
        pstart, pcpu, pheld = t, 0.0, 0.0
        phases.append("%s %d %d %s=%d" % (name, t + S, t + (SECONDS + 1) * S, name, pid))
        for _ in range(SECONDS + 2):
            t += S
            held, busy, active, pcpu, pheld = held + 1, busy + b, active + sm, pcpu + cpu, pheld + 1
            gpu = {"resource": {"attributes": attrs(hw_id=UUID, nvidia_gpu_index=0)}, "scopeMetrics": [{"metrics": [
                {"name": "nvidia.gpu.held.time", "sum": {"dataPoints": [point(t, held, T0)]}},
                {"name": "nvidia.gpu.busy.time", "sum": {"dataPoints": [point(t, busy, T0)]}},
                {"name": "nvidia.gpu.active.time", "sum": {"dataPoints": [point(t, active, T0)]}},
                {"name": "nvidia.gpu.sm.activity", "gauge": {"dataPoints": [point(t, sm)]}},
                {"name": "hw.gpu.utilization", "gauge": {"dataPoints": [point(t, b, hw_gpu_task="general")]}},
                {"name": "hw.gpu.memory.usage", "gauge": {"dataPoints": [point(t, 4e9)]}},
                {"name": "hw.gpu.memory.limit", "gauge": {"dataPoints": [point(t, 150e9)]}}]}]}
            proc = {"resource": {"attributes": attrs(hw_id=UUID, nvidia_gpu_index=0, process_pid=pid)},
                    "scopeMetrics": [{"metrics": [
                        {"name": "nvidia.gpu.process.held.time", "sum": {"dataPoints": [point(t, pheld, pstart)]}},
                        {"name": "process.cpu.time", "sum": {"dataPoints": [
                            point(t, 0.9 * pcpu, pstart, cpu_mode="user"),
                            point(t, 0.1 * pcpu, pstart, cpu_mode="system")]}}]}]}
            lines.append(json.dumps({"resourceMetrics": [gpu, proc]}))
        t += 5 * S
    with open(os.path.join(run_dir, "metrics.jsonl"), "w") as f:
        f.write("\n".join(lines) + "\n")
    with open(os.path.join(run_dir, "phases.txt"), "w") as f:
        f.write("\n".join(phases) + "\n")


def compare(run_dir, *args):
    out = io.StringIO()
    with redirect_stdout(out), mock.patch("sys.argv", ["nolimit-compare.py", run_dir, *args]):
        rc = nc.main()
    return rc, out.getvalue()


class RunTest(unittest.TestCase):
    """A synthetic run in a folder of its own."""

    def setUp(self):
        self.dir = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.dir)
        write_run(self.dir)


class FiguresTest(RunTest):
    def test_figures_without_promtool(self):
        rc, out = compare(self.dir, "--no-promtool")
        self.assertEqual(rc, 0, out)
        self.assertIn("Phase loader (pid 101), 37.0 s measured: GPM SM activity 0.030", out)
        self.assertIn("the process's CPU 1.000 cores", out)
        self.assertIn("PASS  batch50", out)
        self.assertIn("gpu_bound bound 0.70: batch50 0.965 (at or above), sync1 0.560 (under)", out)

    def test_a_phase_off_its_truth_fails(self):
        # The sleeping holder at a core: not the known truth.
        PHASES["sleep"] = (104, 1.0, 0.0, 0.0)
        self.addCleanup(PHASES.__setitem__, "sleep", (104, 0.0, 0.0, 0.0))
        write_run(self.dir)
        rc, out = compare(self.dir, "--no-promtool")
        self.assertEqual(rc, 1, out)
        self.assertIn("FAIL  sleep", out)


@unittest.skipUnless(shutil.which("promtool"), "promtool is not installed")
class StatesTest(RunTest):
    def test_the_shipped_rules(self):
        rc, out = compare(self.dir)
        self.assertEqual(rc, 0, out)
        for name, state in (("loader", "input_bound"), ("batch50", "gpu_bound"), ("sleep", "idle")):
            self.assertIn("PASS  %s: the rules say %s" % (name, state), out)
        # The spinning synchronize: kernels 93 % of the time, so not input_bound.
        self.assertIn("sync1 state underused", out)
        self.assertIn("process CPU 1.000 cores", out)


if __name__ == "__main__":
    unittest.main()
