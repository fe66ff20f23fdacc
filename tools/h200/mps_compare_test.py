"""Tests of the MPS comparison (mps-compare.py) on fabricated runs:
python3 -m unittest tools/h200/mps_compare_test.py (from the repository
root). No GPU needed. A run that follows the MPS model passes every check;
the collector's figures before the model (the server busy the whole time
and holding, each client busy 0 with a utilization of 0) fail."""
import importlib.util
import io
import json
import os
import tempfile
import unittest
from contextlib import redirect_stdout

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("mps_compare", os.path.join(HERE, "mps-compare.py"))
mc = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mc)

S = 10 ** 9
T0 = 1_800_000_000
UUID = "GPU-00000000-0000-4000-8000-00000000a200"
SERVER = 3001
CLIENTS = {3101: ("3c" * 32, 1128), 3102: ("5e" * 32, 516)}
RUN_S, AFTER_S = 40, 10


def kv(**a):
    out = []
    for k, v in a.items():
        k = k.replace("_", ".")
        out.append({"key": k, "value": {"intValue": str(v)} if isinstance(v, int) else {"stringValue": v}})
    return out


def res(**a):
    base = {"hw.id": UUID}
    base.update(a)
    return [{"key": k, "value": {"intValue": str(v)} if isinstance(v, int) else {"stringValue": v}} for k, v in base.items()]


def metric(name, v, t, sum_=True, **pattrs):
    dp = {"timeUnixNano": str(int(t * S)), "asDouble": v, "attributes": kv(**pattrs)}
    return {"name": name, ("sum" if sum_ else "gauge"): {"dataPoints": [dp]}}


def scrape(t, old=False):
    """One scrape at t seconds into the run: the clients run until RUN_S."""
    running = t <= RUN_S
    rms = []
    gpu = [metric("nvidia.gpu.held.time", t if running else RUN_S, T0 + t),
           metric("nvidia.gpu.free.time", 0 if running else t - RUN_S, T0 + t),
           metric("nvidia.gpu.busy.time", t if running else RUN_S, T0 + t)]
    rms.append({"resource": {"attributes": res(**{"nvidia.gpu.sharing": "mps"})}, "scopeMetrics": [{"metrics": gpu}]})
    server = [metric("nvidia.gpu.process.memory.usage", 66 << 20, T0 + t, sum_=False)]
    if old:
        server += [metric("nvidia.gpu.process.held.time", t, T0 + t), metric("nvidia.gpu.process.busy.time", t, T0 + t)]
    sattrs = {"process.pid": SERVER, "nvidia.gpu.sharing": "mps"}
    if not old:
        sattrs["nvidia.gpu.process.mps"] = "server"
    rms.append({"resource": {"attributes": res(**sattrs)}, "scopeMetrics": [{"metrics": server}]})
    if running:
        for pid, (ctr, mib) in CLIENTS.items():
            ms = [metric("nvidia.gpu.process.memory.usage", mib << 20, T0 + t, sum_=False),
                  metric("nvidia.gpu.process.held.time", t, T0 + t),
                  metric("nvidia.gpu.process.busy.time", 0 if old else t / 2, T0 + t)]
            a = {"process.pid": pid, "container.id": ctr, "nvidia.gpu.sharing": "mps"}
            if old:
                ms.append(metric("nvidia.gpu.process.utilization", 0.0, T0 + t, sum_=False, hw_gpu_task="general"))
            else:
                a["nvidia.gpu.process.mps"] = "client"
            rms.append({"resource": {"attributes": res(**a)}, "scopeMetrics": [{"metrics": ms}]})
    return {"resourceMetrics": rms}


def fabricate(d, old=False):
    with open(os.path.join(d, "metrics.jsonl"), "w") as f:
        for t in range(0, RUN_S + AFTER_S + 1):
            f.write(json.dumps(scrape(t, old)) + "\n")
    with open(os.path.join(d, "ids.txt"), "w") as f:
        f.write(f"gpu {UUID}\n")
        for pid, (ctr, _) in CLIENTS.items():
            f.write(f"client {pid} {ctr}\n")
    with open(os.path.join(d, "smi-apps.csv"), "w") as f:
        f.write(f"{SERVER}, nvidia-cuda-mps-server, 66\n")
        for pid, (_, mib) in CLIENTS.items():
            f.write(f"{pid}, python3, {mib}\n")
    with open(os.path.join(d, "times.txt"), "w") as f:
        f.write(f"clients_stopped {T0 + RUN_S + 0.5}\n")


def run(old):
    with tempfile.TemporaryDirectory() as d:
        fabricate(d, old)
        out = io.StringIO()
        with redirect_stdout(out):
            failed = mc.main(d)
        return failed, out.getvalue()


class MPSCompareTest(unittest.TestCase):
    def test_the_model_passes(self):
        failed, out = run(old=False)
        self.assertEqual(failed, 0, out)
        self.assertNotIn("FAIL", out)
        self.assertIn("PASS the idle MPS server alone does not hold the GPU", out)

    def test_the_old_figures_fail(self):
        failed, out = run(old=True)
        self.assertGreater(failed, 0, out)
        for want in ("FAIL the MPS server is marked", "FAIL client 3101: busy 0.0 s",
                     "FAIL client 3101: no utilization series", "FAIL server"):
            self.assertIn(want, out)


if __name__ == "__main__":
    unittest.main()
