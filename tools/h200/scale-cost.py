#!/usr/bin/env python3
"""The issue-19 cost probe for one GPU selection, run by scale-run.sh.

  scale-cost.py collector --bin DIR/otelcol-nvml --devices 0,1 --sink HOST:PORT \
      --seconds 60 --warmup 10 --out cost-n2.json
    runs the collector, nvml at 1 s with `devices:` = the list (the rest of the
    receiver at its defaults) -> debug (basic), self-telemetry metrics off and
    its traces (one span per scrape, "scraper/nvml/ScrapeMetrics") sent to the
    sink collector at HOST:PORT (without --sink: no traces, cost.py's own
    collector with `devices:`, to price the spans); samples its CPU (/proc/<pid>/stat) and RSS
    every second over --seconds after --warmup. The measured window (unix ns)
    goes into the JSON, so that scale-compare.py can take the scrape spans of
    this run out of the sink's file.
  scale-cost.py smi --gpus 0,1 --out smi-n2.json
    times `nvidia-smi -i 0,1 --query-gpu=<cost.py's 15 fields>`: CPU and wall.
  scale-cost.py receiver --build DIR --out DIR
    cost.py's receiver probe (receivercost.test -test.run TestH200ScrapeCost):
    it reads every GPU of the machine (it takes no device selection).
  scale-cost.py sink-config --listen HOST:PORT --path FILE
    prints the sink collector's config (otlp -> file, traces).

Reads only; changes no GPU setting. Helpers come from cost.py.
"""
import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cost  # noqa: E402  (tools/h200/cost.py)

SPAN_NAME = "scraper/nvml/ScrapeMetrics"

# The collector's own traces, batched every 10 s to the sink (fewer exports,
# less of their own CPU; the collector flushes them when it stops).
TRACES = """    traces:
      processors:
        - batch:
            schedule_delay: 10000
            exporter:
              otlp:
                protocol: grpc
                endpoint: http://{sink}
                insecure: true
"""
_TELEMETRY = "  telemetry:\n    metrics:\n      level: none\n"


def receiver_block(devices, interval="1s", library_path=""):
    block = "nvml:\n    collection_interval: %s\n    devices: [%s]" % (
        interval, ", ".join('"%s"' % d for d in devices))
    if library_path:  # a simulated NVML, to try this script without a GPU
        block += "\n    library_path: %s" % library_path
    return block


def collector_config(devices, sink, library_path=""):
    """cost.py's collector (nvml -> debug, self-telemetry metrics off) with
    `devices:` and the traces to the sink (none when sink is empty)."""
    cfg = cost.collector_config(receiver_block(devices, library_path=library_path))
    if not sink:
        return cfg
    if _TELEMETRY not in cfg:
        raise ValueError("cost.collector_config changed: no telemetry block to extend")
    return cfg.replace(_TELEMETRY, _TELEMETRY + TRACES.format(sink=sink))


def sink_config(listen, path):
    return """receivers:
  otlp:
    protocols:
      grpc:
        endpoint: %s
exporters:
  file:
    path: %s
service:
  telemetry:
    metrics:
      level: none
  pipelines:
    traces:
      receivers: [otlp]
      exporters: [file]
""" % (listen, path)


def threads_cpu_ns(pid):
    """The CPU time of the process's live threads, in ns (schedstat: exact,
    where /proc/<pid>/stat counts 10 ms ticks); None without schedstat.
    A thread that exited takes its time with it: Go's threads seldom do."""
    total = 0
    try:
        for tid in os.listdir("/proc/%d/task" % pid):
            try:
                with open("/proc/%d/task/%s/schedstat" % (pid, tid)) as f:
                    total += int(f.read().split()[0])
            except (FileNotFoundError, ProcessLookupError):
                pass
    except FileNotFoundError:
        return None
    return total


def run_collector(exe, devices, sink, seconds, warmup, log_path, library_path=""):
    config = collector_config(devices, sink, library_path)
    cfg = tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False)
    cfg.write(config)
    cfg.close()
    log = open(log_path, "w")
    p = subprocess.Popen([exe, "--config", cfg.name], stdout=log, stderr=log)
    res = {"devices": devices, "config": config}
    try:
        time.sleep(warmup)
        if p.poll() is not None:
            res["error"] = "the collector exited (%s) during the warm-up; see its log" % p.returncode
            return res
        t0_ns, c0, m0 = time.time_ns(), cost.proc_cpu_s(p.pid), time.monotonic()
        s_prev = threads_cpu_ns(p.pid)
        cpu_per_s, rss = [], []
        for k in range(1, int(seconds) + 1):
            time.sleep(max(0.0, m0 + k - time.monotonic()))
            s_now = threads_cpu_ns(p.pid)
            if s_now is not None and s_prev is not None:
                cpu_per_s.append((s_now - s_prev) / 1e6)
            s_prev = s_now
            rss.append(cost.proc_rss_mib(p.pid))
        c1, t1_ns, m1 = cost.proc_cpu_s(p.pid), time.time_ns(), time.monotonic()
        res.update({
            "window_ns": [t0_ns, t1_ns], "seconds": m1 - m0,
            # /proc/<pid>/stat over the whole window (as cost.py)
            "cpu_ms_per_s": (c1 - c0) * 1000 / (m1 - m0),
            # each second's CPU from the threads' schedstat (one scrape each)
            "cpu_ms_each_s": cpu_per_s,
            "rss_mib_end": rss[-1], "rss_mib_max": max(rss), "memory": cost.memory_map(p.pid),
        })
        return res
    finally:
        p.send_signal(signal.SIGTERM)
        try:
            res["exit"] = p.wait(timeout=15)
        except subprocess.TimeoutExpired:
            p.kill()
            res["exit"] = "killed after 15 s of SIGTERM"
        log.close()
        os.unlink(cfg.name)


def smi(gpus, runs=10):
    """cost.smi for the selected GPUs: nvidia-smi -i LIST, the same 15 fields."""
    import resource
    walls, cpus = [], []
    for _ in range(runs):
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        subprocess.run(["nvidia-smi", "-i", ",".join(gpus), "--query-gpu=" + cost.SMI_FIELDS,
                        "--format=csv,noheader"], check=True, stdout=subprocess.DEVNULL)
        walls.append((time.perf_counter() - t0) * 1000)
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append((r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime) * 1000)
        time.sleep(0.2)
    walls.sort()
    cpus.sort()
    return {"gpus": gpus, "runs": runs, "fields": len(cost.SMI_FIELDS.split(",")),
            "wall_ms_p50": walls[len(walls) // 2], "cpu_ms_p50": cpus[len(cpus) // 2],
            "wall_ms_p99": cost.pct(walls, 0.99), "cpu_ms_p99": cost.pct(cpus, 0.99)}


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("collector")
    c.add_argument("--bin", required=True)
    c.add_argument("--devices", required=True, help="NVML indices, comma-separated")
    c.add_argument("--sink", default="", help="HOST:PORT of the traces sink (none: no traces)")
    c.add_argument("--seconds", type=int, default=60)
    c.add_argument("--warmup", type=int, default=10)
    c.add_argument("--log", required=True)
    c.add_argument("--out", required=True)
    c.add_argument("--library-path", default="", help="libnvidia-ml.so.1 to load (default: the loader's)")
    s = sub.add_parser("smi")
    s.add_argument("--gpus", required=True)
    s.add_argument("--runs", type=int, default=10)
    s.add_argument("--out", required=True)
    r = sub.add_parser("receiver")
    r.add_argument("--build", required=True)
    r.add_argument("--out", required=True, help="a folder: receiver-all.txt and receivercost.json")
    k = sub.add_parser("sink-config")
    k.add_argument("--listen", required=True)
    k.add_argument("--path", required=True)
    a = ap.parse_args()
    if a.cmd == "sink-config":
        sys.stdout.write(sink_config(a.listen, a.path))
        return 0
    if a.cmd == "collector":
        res = run_collector(a.bin, a.devices.split(","), a.sink, a.seconds, a.warmup, a.log, a.library_path)
        path = a.out
    elif a.cmd == "smi":
        res, path = smi(a.gpus.split(","), a.runs), a.out
    else:
        res, path = cost.receiver(a.build, a.out, "all"), os.path.join(a.out, "receivercost.json")
    with open(path, "w") as f:
        json.dump(res, f, indent=1)
    print(json.dumps({k: v for k, v in res.items() if k not in ("config", "memory", "cpu_ms_each_s", "calls")}))
    return 1 if "error" in res else 0


if __name__ == "__main__":
    sys.exit(main())
