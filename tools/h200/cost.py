#!/usr/bin/env python3
"""The cost probe: what one scrape of every GPU costs, side by side with
nvidia-smi, for one or more builds (e.g. before=DIR after=DIR).

For each build DIR (holding otelcol-nvml and receivercost.test):
  - the receiver's own scrape, default config (receivercost.test): wall and
    process CPU per scrape, p50/p99;
  - the built collector, nvml (defaults, collection_interval 1s) -> debug
    (basic), self-telemetry off: CPU % of one core and RSS over --seconds.
And once: nvidia-smi --query-gpu with 15 fields, wall and CPU per call.

Prints a markdown table and writes cost.json. Reads only; changes no GPU
setting. Works with any number of GPUs (the receiver and nvidia-smi read
them all); --load names them and their load in the table.
Usage: cost.py --out DIR --seconds 45 [--load TEXT] before=DIR after=DIR [label=DIR@BLOCK.yaml]
(BLOCK.yaml: the nvml receiver block to run that build's collector with.)
"""
import argparse
import json
import os
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import time

SMI_FIELDS = ("index,uuid,name,temperature.gpu,utilization.gpu,utilization.memory,memory.total,memory.used,"
              "memory.free,power.draw,power.limit,clocks.sm,clocks.mem,pstate,fan.speed")

def collector_config(receiver, signal="metrics"):
    """One receiver (a YAML block under receivers:) -> debug, self-telemetry off."""
    name = receiver.split(":")[0]
    return f"""receivers:
  {receiver}
exporters:
  debug:
    verbosity: basic
service:
  telemetry:
    metrics:
      level: none
  pipelines:
    {signal}:
      receivers: [{name}]
      exporters: [debug]
"""


# The receiver with its defaults at a 1 s interval.
CONFIG = collector_config("nvml:\n    collection_interval: 1s")
# The same collector with nothing to do: what the binary costs by itself.
IDLE_CONFIG = collector_config("otlp:\n    protocols:\n      grpc:\n        endpoint: 127.0.0.1:14317")
# Only the event watcher: the receiver in a logs pipeline waits on NVML
# events (XID, ECC) and reads nothing else.
EVENTS_CONFIG = collector_config("nvml:", signal="logs")


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def smi(runs=10):
    assert len(SMI_FIELDS.split(",")) == 15
    walls, cpus = [], []
    for _ in range(runs):
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        subprocess.run(["nvidia-smi", "--query-gpu=" + SMI_FIELDS, "--format=csv,noheader"],
                       check=True, stdout=subprocess.DEVNULL)
        walls.append((time.perf_counter() - t0) * 1000)
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append((r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime) * 1000)
        time.sleep(0.2)
    return {"wall_ms_p50": statistics.median(walls), "cpu_ms_p50": statistics.median(cpus),
            "wall_ms_p99": pct(walls, 0.99), "cpu_ms_p99": pct(cpus, 0.99)}


def receiver(build, out, label):
    exe = os.path.join(build, "receivercost.test")
    env = dict(os.environ, COST_SCRAPES="40", COST_INTERVAL_MS="500")
    p = subprocess.run([exe, "-test.run", "TestH200ScrapeCost", "-test.v"], env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
    with open(os.path.join(out, f"receiver-{label}.txt"), "w") as f:
        f.write(p.stdout)
    for line in p.stdout.splitlines():
        if line.startswith("COST "):
            return json.loads(line[5:])
    return {"error": p.stdout[-2000:]}


def proc_cpu_s(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def proc_rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def memory_map(pid, top=8):
    """RssAnon/RssFile and the largest mappings by Rss (KiB), from smaps."""
    out = {"top": []}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            k = line.split(":")[0]
            if k in ("RssAnon", "RssFile", "VmRSS"):
                out[k] = int(line.split()[1])
    maps, name = [], ""
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            parts = line.split()
            if "-" in parts[0] and len(parts) >= 5 and ":" in parts[3]:
                name = parts[5] if len(parts) > 5 else "[anon]"
                perms = parts[1]
            elif parts[0] == "Rss:":
                maps.append((int(parts[1]), os.path.basename(name), perms))
    byname = {}
    for kib, n, perms in maps:
        byname[(n, perms)] = byname.get((n, perms), 0) + kib
    out["top"] = sorted(([k, n, p] for (n, p), k in byname.items()), reverse=True)[:top]
    return out


def collector(build, out, label, seconds, warmup=10, config=CONFIG):
    cfg = tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False)
    cfg.write(config)
    cfg.close()
    log = open(os.path.join(out, f"collector-{label}.log"), "w")
    p = subprocess.Popen([os.path.join(build, "otelcol-nvml"), "--config", cfg.name], stdout=log, stderr=log)
    try:
        time.sleep(warmup)
        c0, t0 = proc_cpu_s(p.pid), time.monotonic()
        rss = []
        while time.monotonic() - t0 < seconds:
            time.sleep(1)
            rss.append(proc_rss_mib(p.pid))
        c1, t1 = proc_cpu_s(p.pid), time.monotonic()
        cpu_pct = (c1 - c0) / (t1 - t0) * 100
        return {"cpu_pct": cpu_pct, "cpu_ms_per_scrape": cpu_pct * 10, "rss_mib_end": rss[-1],
                "rss_mib_max": max(rss), "seconds": t1 - t0, "memory": memory_map(p.pid)}
    finally:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(timeout=15)
        except subprocess.TimeoutExpired:
            p.kill()
        log.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--seconds", type=int, default=45)
    ap.add_argument("--load", default="2 GPUs", help="the GPUs and their load, for the table's heading")
    ap.add_argument("builds", nargs="+", help="label=DIR")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    res = {"load": a.load, "smi": smi(), "builds": {}}
    for b in a.builds:
        label, d = b.split("=", 1)
        # label=DIR@FILE: the collector runs with FILE as its receiver block
        # (e.g. some metrics off), to price a set of metrics.
        config = CONFIG
        if "@" in d:
            d, block = d.split("@", 1)
            with open(block) as f:
                config = collector_config(f.read().strip("\n"))
        res["builds"][label] = {"receiver": receiver(d, a.out, label), "collector": collector(d, a.out, label, a.seconds, config=config)}
    last = a.builds[-1].split("=", 1)[1].split("@", 1)[0]
    res["idle"] = collector(last, a.out, "idle", min(a.seconds, 20), config=IDLE_CONFIG)
    res["events"] = collector(last, a.out, "events", min(a.seconds, 30), config=EVENTS_CONFIG)
    with open(os.path.join(a.out, "cost.json"), "w") as f:
        json.dump(res, f, indent=1)
    labels = list(res["builds"])
    s = res["smi"]
    print(f"| what ({a.load}) | " + " | ".join(labels) + " |")
    print("|---|" + "---|" * len(labels))
    rows = [
        ("receiver scrape, CPU ms p50 / p99", lambda r: f'{r["receiver"].get("cpu_ms_p50", "?")} / {r["receiver"].get("cpu_ms_p99", "?")}'),
        ("receiver scrape, wall ms p50 / p99", lambda r: f'{r["receiver"].get("wall_ms_p50", "?")} / {r["receiver"].get("wall_ms_p99", "?")}'),
        ("receiver, all process CPU per scrape (ms)", lambda r: f'{r["receiver"].get("cpu_ms_per_scrape_all", 0):.2f}'),
        ("collector nvml -> debug at 1 s, CPU % of a core", lambda r: f'{r["collector"]["cpu_pct"]:.2f}'),
        ("collector, CPU ms per scrape", lambda r: f'{r["collector"]["cpu_ms_per_scrape"]:.1f}'),
        ("collector RSS MiB (end / max)", lambda r: f'{r["collector"]["rss_mib_end"]:.0f} / {r["collector"]["rss_mib_max"]:.0f}'),
    ]
    for name, f in rows:
        print(f"| {name} | " + " | ".join(f(res["builds"][l]) for l in labels) + " |")
    print(f'| nvidia-smi --query-gpu, 15 fields: CPU / wall ms p50 | {s["cpu_ms_p50"]:.1f} / {s["wall_ms_p50"]:.1f} |')
    i, e = res["idle"], res["events"]
    print(f'| the last build idle (otlp -> debug): CPU % / RSS MiB | {i["cpu_pct"]:.2f} / {i["rss_mib_end"]:.0f} |')
    print(f'| the last build, only the event watcher (nvml in a logs pipeline): CPU % / RSS MiB | {e["cpu_pct"]:.2f} / {e["rss_mib_end"]:.0f} |')
    print()
    print("Resident memory (KiB) at the end of each collector run: anonymous, file-backed, largest mappings")
    print()
    runs = [(l, res["builds"][l]["collector"]) for l in labels] + [("idle", i), ("events", e)]
    for l, r in runs:
        m = r["memory"]
        top = ", ".join(f"{n} {p} {k}" for k, n, p in m["top"])
        print(f'- {l}: anon {m.get("RssAnon")}, file {m.get("RssFile")}; {top}')


if __name__ == "__main__":
    sys.exit(main())
