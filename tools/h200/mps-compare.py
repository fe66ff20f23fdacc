"""Checks otelcol-nvml's file-exporter output from mps-run.sh against the
MPS model (docs/design/waste.md, "MPS") and prints one PASS or FAIL line per
check; exit status 1 when any fails.

    python3 mps-compare.py RUN_DIR

RUN_DIR holds metrics.jsonl (the collector's output), ids.txt (lines
"client <pid> <container id>" and "gpu <uuid>"), smi-apps.csv (nvidia-smi
--query-compute-apps=pid,process_name,used_memory --format=csv,noheader,nounits,
taken while the clients ran), and times.txt ("clients_stopped <unix s>").
"""
import json
import os
import sys

# How far a counter may be from its truth: two collection intervals (1 s)
# at each end of the window, and the utilization's own roughness.
SLACK_S = 3.0


def attrs(kvs):
    return {kv["key"]: list(kv["value"].values())[0] for kv in kvs}


def read_points(path):
    """Every point as (metric, resource attrs, point attrs, t seconds, value)."""
    out = []
    with open(path) as f:
        lines = f.read().splitlines()
    for line in lines:
        if not line.strip():
            continue
        for rm in json.loads(line).get("resourceMetrics", []):
            res = attrs(rm["resource"].get("attributes", []))
            for sm in rm.get("scopeMetrics", []):
                for m in sm.get("metrics", []):
                    for dp in (m.get("sum") or m.get("gauge") or {}).get("dataPoints", []):
                        v = dp.get("asDouble", dp.get("asInt"))
                        out.append((m["name"], res, attrs(dp.get("attributes", [])),
                                    int(dp["timeUnixNano"]) / 1e9, float(v)))
    return out


def read_ids(path):
    clients, gpu = {}, None
    with open(path) as f:
        lines = f.read().splitlines()
    for line in lines:
        f = line.split()
        if f and f[0] == "client":
            clients[int(f[1])] = f[2]
        elif f and f[0] == "gpu":
            gpu = f[1]
    return clients, gpu


def read_smi(path):
    """pid -> (name, MiB), the largest reading of each pid."""
    out = {}
    with open(path) as fh:
        lines = fh.read().splitlines()
    for line in lines:
        f = [x.strip() for x in line.split(",")]
        if len(f) < 3 or not f[0].isdigit() or not f[2].isdigit():
            continue
        pid, name, mib = int(f[0]), f[1], int(f[2])
        if pid not in out or mib > out[pid][1]:
            out[pid] = (name, mib)
    return out


def growth(pts, until=None, since=None):
    """How much a counter's points grew, over its series (by start of stream
    and resource), between since and until (unix s)."""
    by = {}
    for name, res, pa, t, v in pts:
        if (until is not None and t > until) or (since is not None and t < since):
            continue
        key = tuple(sorted(res.items())) + tuple(sorted(pa.items()))
        by.setdefault(key, []).append((t, v))
    total, span = 0.0, 0.0
    for series in by.values():
        series.sort()
        total += series[-1][1] - series[0][1]
        span = max(span, series[-1][0] - series[0][0])
    return total, span


class Report:
    def __init__(self):
        self.failed = 0

    def check(self, ok, what):
        print(("PASS " if ok else "FAIL ") + what)
        if not ok:
            self.failed += 1


def main(run):
    pts = read_points(os.path.join(run, "metrics.jsonl"))
    clients, gpu = read_ids(os.path.join(run, "ids.txt"))
    smi = read_smi(os.path.join(run, "smi-apps.csv"))
    stopped = None
    if os.path.exists(os.path.join(run, "times.txt")):
        with open(os.path.join(run, "times.txt")) as fh:
            times = fh.read().splitlines()
        for line in times:
            f = line.split()
            if len(f) == 2 and f[0] == "clients_stopped":
                stopped = float(f[1])
    # The clients' window ends at the last scrape that listed one: the
    # script notes their end only after it has seen them exit.
    client_ts = [p[3] for p in pts if int(p[1].get("process.pid", -1)) in clients]
    if client_ts:
        stopped = min(stopped, max(client_ts)) if stopped is not None else max(client_ts)
    r = Report()

    def on_gpu(p):
        return p[1].get("hw.id") == gpu

    def of(name, pred=lambda p: True):
        return [p for p in pts if p[0] == name and on_gpu(p) and pred(p)]

    def is_gpu(p):
        return "process.pid" not in p[1]

    def pid_is(pid):
        return lambda p: int(p[1].get("process.pid", -1)) == pid

    servers = sorted({int(p[1]["process.pid"]) for p in pts if on_gpu(p) and p[1].get("nvidia.gpu.process.mps") == "server"})
    smi_servers = sorted(pid for pid, (name, _) in smi.items() if name.endswith("nvidia-cuda-mps-server"))
    r.check(len(servers) == 1 and servers == smi_servers,
            f"the MPS server is marked: {servers} (nvidia-smi lists {smi_servers})")

    # The window while the clients ran.
    held, span = growth(of("nvidia.gpu.held.time", is_gpu), until=stopped)
    busy, _ = growth(of("nvidia.gpu.busy.time", is_gpu), until=stopped)
    r.check(span > 20 and abs(held - span) <= SLACK_S,
            f"the GPU is held while the clients run: {held:.1f} s of {span:.1f} s")
    r.check(busy > 0.5 * span, f"the GPU is busy while the clients run (a spinner keeps a kernel on it): {busy:.1f} s of {span:.1f} s")
    sharing = {p[1].get("nvidia.gpu.sharing") for p in of("nvidia.gpu.held.time", is_gpu)}
    r.check(sharing == {"mps"}, f"the GPU's series say nvidia.gpu.sharing=mps: {sorted(map(str, sharing))}")

    parts = 0.0
    for pid, ctr in sorted(clients.items()):
        mine = pid_is(pid)
        role = {p[1].get("nvidia.gpu.process.mps") for p in pts if on_gpu(p) and mine(p)}
        r.check(role == {"client"}, f"client {pid}: nvidia.gpu.process.mps {sorted(map(str, role))}")
        ctrs = {p[1].get("container.id") for p in pts if on_gpu(p) and mine(p)}
        r.check(ctrs == {ctr}, f"client {pid}: container {sorted(map(str, ctrs))} (want {ctr[:12]})")
        b, _ = growth(of("nvidia.gpu.process.busy.time", mine), until=stopped)
        h, _ = growth(of("nvidia.gpu.process.held.time", mine), until=stopped)
        parts += b
        r.check(b > 0.1 and abs(b - busy / len(clients)) <= SLACK_S,
                f"client {pid}: busy {b:.1f} s, an even part of the GPU's {busy:.1f} s, not a measured 0")
        r.check(abs(h - held) <= SLACK_S, f"client {pid}: held {h:.1f} s (the GPU {held:.1f} s)")
        util = of("nvidia.gpu.process.utilization", mine)
        r.check(not util, f"client {pid}: no utilization series (not observable under MPS): {len(util)} points")
        mem = [p[4] for p in of("nvidia.gpu.process.memory.usage", mine)]
        want = smi.get(pid, (None, None))[1]
        got = max(mem) / (1 << 20) if mem else None
        r.check(got is not None and want is not None and abs(got - want) <= max(2, 0.02 * want),
                f"client {pid}: memory {got if got is None else round(got)} MiB, nvidia-smi {want} MiB")
    r.check(abs(parts - busy) <= SLACK_S, f"the clients' busy parts add up to the GPU's: {parts:.1f} s of {busy:.1f} s")

    every_server = sorted(set(servers) | set(smi_servers))
    for pid in every_server:
        mine = pid_is(pid)
        for name in ("nvidia.gpu.process.held.time", "nvidia.gpu.process.busy.time", "nvidia.gpu.process.idle.time"):
            r.check(not of(name, mine), f"server {pid}: holds nothing, no {name}")
        mem = [p[4] for p in of("nvidia.gpu.process.memory.usage", mine)]
        want = smi.get(pid, (None, None))[1]
        got = max(mem) / (1 << 20) if mem else None
        r.check(got is not None and want is not None and abs(got - want) <= max(2, 0.02 * want),
                f"server {pid}: its memory is its own: {got if got is None else round(got)} MiB, nvidia-smi {want} MiB")

    xids = sorted({p[2].get("nvidia.gpu.xid", p[2].get("code")) for p in pts
                   if p[0] == "nvidia.gpu.xid.errors" and on_gpu(p) and p[4] > 0})
    print(f"INFO Xids during the run: {xids or 'none'}")

    # After the clients stopped: the server alone holds nothing.
    if stopped is not None:
        after = [p for p in of("nvidia.gpu.process.memory.usage") if p[3] > stopped + 2]
        alone = after and all(int(p[1]["process.pid"]) in every_server for p in after)
        if alone:
            h, s = growth(of("nvidia.gpu.held.time", is_gpu), since=stopped + 2)
            f, _ = growth(of("nvidia.gpu.free.time", is_gpu), since=stopped + 2)
            r.check(s > 2 and h <= 1 and abs(f - s) <= SLACK_S,
                    f"the idle MPS server alone does not hold the GPU: held {h:.1f} s, free {f:.1f} s of {s:.1f} s")
        else:
            print("SKIP the idle server alone: no scrape listed the server alone after the clients stopped")
    return r.failed


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    sys.exit(1 if main(sys.argv[1]) else 0)
