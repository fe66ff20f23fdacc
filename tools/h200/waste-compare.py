#!/usr/bin/env python3
"""Checks the waste-accounting run on a real GPU (waste-run.sh, issue 15).

Reads RUN_DIR/metrics.jsonl (the file exporter's OTLP JSON lines) and
RUN_DIR/phases.txt (one line a phase: NAME START_NS END_NS [role=PID ...],
unix nanoseconds of the run's wall clock), prints one PASS/FAIL line per
check with its figures, writes RUN_DIR/report.txt and exits 1 on a FAIL
(2 when an input is missing).

Every phase is measured from its start + --skip seconds (3) to its end. A
counter's increase over [a, b] is the sum, over its streams (one per start
time), of its value at b minus its value at a, read by linear interpolation
between the points, from 0 at the stream's start time (each scrape adds its
window's figure times the window's length, so the counter grows linearly
within a window), and held at its last value after its last point. A
gauge's truth over [a, b] is the time-weighted mean of its points, each
point standing for the window since the previous one (GPM's SM activity is
the figure between two scrapes' samples).

Phases:
  A  a 50 %-duty matmul: rate(active) = GPM SM activity within 0.02
  B  a process that holds memory and sleeps: held rate 1.0 and
     idle / held 1.0, within 0.02
  C  no process: the held counter does not grow
  D  the matmul and a spinning block share the GPU: the processes' busy
     rates sum to the GPU's within 0.03, split as NVML's per-process
     figures do (within 0.10), and rate(active) = GPM SM activity within 0.02
"""
import argparse
import bisect
import json
import math
import os
import statistics
import sys

BASELINE_SM_ACTIVITY = "0.43-0.45 (the 50 %-duty matmul, gpmwatch 1 s windows and issue-4/5 runs: ~0.44)"
ACCOUNT_METRICS = {"nvidia.gpu.held.time", "nvidia.gpu.busy.time", "nvidia.gpu.active.time", "nvidia.gpu.idle.time",
                   "nvidia.gpu.process.held.time", "nvidia.gpu.process.busy.time", "nvidia.gpu.process.idle.time"}
BASELINE_SPLIT = "about 20/80 (matmul/spinning block, NVML's per-process figures, 2026-12-01)"


def attr_value(v):
    """An OTLP JSON AnyValue as a Python value (ints arrive as strings)."""
    if "intValue" in v:
        return int(v["intValue"])
    if "doubleValue" in v:
        return float(v["doubleValue"])
    if "boolValue" in v:
        return bool(v["boolValue"])
    if "stringValue" in v:
        return v["stringValue"]
    return json.dumps(v)


def attrs_of(items):
    return {a["key"]: attr_value(a.get("value", {})) for a in items or []}


class Data:
    """The GPU's and its processes' points, read from metrics.jsonl."""

    def __init__(self, gpu_index):
        self.gpu_index = gpu_index
        self.uuid = None
        # (pid or None, metric, dp attrs, start ns) -> [(t ns, v)]
        self.sums = {}
        # (pid or None, metric, dp attrs) -> [(t ns, v)]
        self.gauges = {}
        self.proc_attrs = {}  # pid -> resource attributes
        self.other_gpus = set()

    def read(self, path):
        with open(path) as f:
            for line in f:
                if line.strip():
                    self.add(json.loads(line))
        for d in (self.sums, self.gauges):
            for pts in d.values():
                pts.sort()

    def add(self, doc):
        for rm in doc.get("resourceMetrics", []):
            ra = attrs_of(rm.get("resource", {}).get("attributes"))
            if "hw.parent" in ra:  # a MIG device: not this run's
                continue
            if int(ra.get("nvidia.gpu.index", -1)) != self.gpu_index:
                self.other_gpus.add(ra.get("nvidia.gpu.index"))
                continue
            pid = ra.get("process.pid")
            if pid is None:
                self.uuid = ra.get("hw.id", self.uuid)
            else:
                pid = int(pid)
                self.proc_attrs[pid] = ra
            for sm in rm.get("scopeMetrics", []):
                for m in sm.get("metrics", []):
                    self.add_metric(pid, m)

    def add_metric(self, pid, m):
        if "sum" in m:
            kind, body = "sum", m["sum"]
        elif "gauge" in m:
            kind, body = "gauge", m["gauge"]
        else:
            return
        for dp in body.get("dataPoints", []):
            if "asDouble" in dp:
                v = float(dp["asDouble"])
            elif "asInt" in dp:
                v = float(dp["asInt"])
            else:
                continue
            da = tuple(sorted((k, str(x)) for k, x in attrs_of(dp.get("attributes")).items()))
            t = int(dp["timeUnixNano"])
            if kind == "sum":
                key = (pid, m["name"], da, int(dp.get("startTimeUnixNano", 0)))
                self.sums.setdefault(key, []).append((t, v))
            else:
                self.gauges.setdefault((pid, m["name"], da), []).append((t, v))

    # ---- counters ----

    def streams(self, name, pid=None, attrs=None):
        for (p, n, da, start), pts in self.sums.items():
            if n == name and p == pid and (attrs is None or dict(da) == attrs):
                yield start, pts

    def has(self, name, pid=None):
        return any(True for _ in self.streams(name, pid))

    def increase(self, name, a, b, pid=None, attrs=None):
        """The counter's increase over [a, b] (ns), summed over its streams;
        None when it has no point at all."""
        total, seen = 0.0, False
        for start, pts in self.streams(name, pid, attrs):
            seen = True
            total += stream_value(start, pts, b) - stream_value(start, pts, a)
        return total if seen else None

    def rate(self, name, a, b, pid=None, attrs=None):
        inc = self.increase(name, a, b, pid, attrs)
        return None if inc is None else inc / ((b - a) / 1e9)

    def monotonic_faults(self):
        """Accounting streams whose value went down, or that counted more
        time than passed since their start."""
        faults = []
        for (pid, name, da, start), pts in self.sums.items():
            if name not in ACCOUNT_METRICS and name != "process.cpu.time":
                continue
            who = "GPU" if pid is None else "pid %d" % pid
            for (_, v0), (t1, v1) in zip(pts, pts[1:]):
                if v1 < v0 - 1e-9:
                    faults.append("%s %s%s went down %.6f -> %.6f at %d" % (who, name, dict(da) or "", v0, v1, t1))
                    break
            if name in ACCOUNT_METRICS and start:
                t, v = pts[-1]
                if v > (t - start) / 1e9 + 1e-3:
                    faults.append("%s %s: %.3f s counted in %.3f s since its start" % (who, name, v, (t - start) / 1e9))
        return faults

    # ---- gauges ----

    def gauge_points(self, name, a, b, pid=None, attrs=None):
        out = []
        for (p, n, da), pts in self.gauges.items():
            if n == name and p == pid and (attrs is None or dict(da) == attrs):
                out += [(t, v) for t, v in pts if a <= t <= b]
        return sorted(out)

    def weighted_mean(self, name, a, b, pid=None, attrs=None):
        """Each point stands for (previous point, its time]; the mean over
        [a, b] weighs each by its overlap with [a, b]."""
        num = den = 0.0
        for (p, n, da), pts in self.gauges.items():
            if n != name or p != pid or (attrs is not None and dict(da) != attrs):
                continue
            for (t0, _), (t1, v) in zip(pts, pts[1:]):
                w = min(t1, b) - max(t0, a)
                if w > 0:
                    num += v * w
                    den += w
        return num / den if den else None

    def gpu_points(self, a, b):
        """Scrapes of the GPU in [a, b]: its hw.gpu.utilization points."""
        return len(self.gauge_points("hw.gpu.utilization", a, b, attrs={"hw.gpu.task": "general"}))

    def pids_in(self, a, b):
        pids = set()
        for (p, n, _, _), pts in self.sums.items():
            if p is not None and n == "nvidia.gpu.process.held.time" and any(a <= t <= b for t, _ in pts):
                pids.add(p)
        return sorted(pids)


def stream_value(start, pts, t):
    """A counter stream's value at t: 0 at its start time, linear between
    its points, its last value after the last point (and its first before
    the first, where the start is unknown)."""
    xs, ys = [p[0] for p in pts], [p[1] for p in pts]
    if start and start < xs[0]:
        xs, ys = [start] + xs, [0.0] + ys
    if t <= xs[0]:
        return ys[0]
    if t >= xs[-1]:
        return ys[-1]
    i = bisect.bisect_right(xs, t)
    x0, x1, y0, y1 = xs[i - 1], xs[i], ys[i - 1], ys[i]
    return y0 + (y1 - y0) * (t - x0) / (x1 - x0)


def read_phases(path):
    phases = {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            parts = line.split()
            roles = dict(p.split("=", 1) for p in parts[3:] if "=" in p)
            phases[parts[0]] = {"start": int(parts[1]), "end": int(parts[2]),
                                "pids": {k: int(v) for k, v in roles.items() if v.isdigit()}}
    return phases


def read_run(run_dir, gpu_index):
    """The run's points of the GPU and its phases (metrics.jsonl and
    phases.txt in run_dir), or None, after a FAIL line, when one is missing."""
    mpath, ppath = os.path.join(run_dir, "metrics.jsonl"), os.path.join(run_dir, "phases.txt")
    for p in (mpath, ppath):
        if not os.path.exists(p):
            print("FAIL  input: %s is missing" % p)
            return None
    d = Data(gpu_index)
    d.read(mpath)
    return d, read_phases(ppath)


def fmt(x, nd=3):
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else ("%.*f" % (nd, x))


class Report:
    def __init__(self):
        self.lines, self.failed, self.checks = [], 0, 0

    def say(self, text=""):
        print(text, flush=True)
        self.lines.append(text)

    def check(self, name, ok, detail):
        self.checks += 1
        self.failed += 0 if ok else 1
        self.say("%s  %s: %s" % ("PASS" if ok else "FAIL", name, detail))


def within(x, target, tol):
    return x is not None and abs(x - target) <= tol


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("run_dir", help="the folder with metrics.jsonl and phases.txt")
    ap.add_argument("--gpu-index", type=int, default=int(os.environ.get("GPU_INDEX", "0")))
    ap.add_argument("--skip", type=float, default=3.0, help="seconds left out at each phase's start")
    ap.add_argument("--active-tol", type=float, default=0.02)
    ap.add_argument("--rate-tol", type=float, default=0.02)
    ap.add_argument("--sum-tol", type=float, default=0.03)
    ap.add_argument("--split-tol", type=float, default=0.10)
    a = ap.parse_args()

    run = read_run(a.run_dir, a.gpu_index)
    if run is None:
        return 2
    d, phases = run
    r = Report()
    r.say("GPU %d (%s); %d counter streams, %d gauge series; other GPUs in the file: %s" % (
        a.gpu_index, d.uuid, len(d.sums), len(d.gauges), sorted(d.other_gpus, key=str) or "none"))
    r.check("the GPU's points are in the file", d.uuid is not None and d.has("nvidia.gpu.held.time"),
            "hw.id %s, nvidia.gpu.held.time %s" % (d.uuid, "present" if d.has("nvidia.gpu.held.time") else "absent"))
    faults = d.monotonic_faults()
    r.check("every accounting counter only grows, and never past its wall time", not faults,
            "; ".join(faults[:5]) if faults else "%d streams" % sum(1 for k in d.sums if k[1] in ACCOUNT_METRICS))

    def window(name):
        ph = phases.get(name)
        if ph is None:
            return None
        s = ph["start"] + int(a.skip * 1e9)
        return s, ph["end"], ph["pids"]

    def gpu_figures(name, w0, w1):
        dur = (w1 - w0) / 1e9
        f = {k: d.rate("nvidia.gpu.%s.time" % k, w0, w1) for k in ("held", "busy", "active", "idle")}
        f["sm"] = d.weighted_mean("nvidia.gpu.sm.activity", w0, w1)
        f["util"] = d.weighted_mean("hw.gpu.utilization", w0, w1, attrs={"hw.gpu.task": "general"})
        f["scrapes"] = d.gpu_points(w0, w1)
        r.say("")
        r.say("Phase %s, %.1f s measured (%d scrapes): held %s  busy %s  active %s  idle %s (rates); "
              "GPM SM activity %s, utilization %s (time-weighted means)" % (
                  name, dur, f["scrapes"], fmt(f["held"]), fmt(f["busy"]), fmt(f["active"]), fmt(f["idle"]),
                  fmt(f["sm"], 4), fmt(f["util"])))
        expect = max(1, int(dur * 0.8))  # 1 s scrapes
        r.check("%s: the GPU was read through the phase" % name, f["scrapes"] >= expect,
                "%d scrapes in %.1f s (at least %d)" % (f["scrapes"], dur, expect))
        return f

    def process_figures(role, pid, w0, w1):
        f = {k: d.rate("nvidia.gpu.process.%s.time" % k, w0, w1, pid=pid) for k in ("held", "busy", "idle")}
        cpu = [d.rate("process.cpu.time", w0, w1, pid=pid, attrs={"cpu.mode": m}) for m in ("user", "system")]
        f["cpu"] = None if None in cpu else sum(cpu)
        util = [v for _, v in d.gauge_points("nvidia.gpu.process.utilization", w0, w1, pid=pid,
                                             attrs={"hw.gpu.task": "general"})]
        f["util_median"] = statistics.median(util) if util else None
        f["util_mean"] = statistics.fmean(util) if util else None
        ra = d.proc_attrs.get(pid, {})
        r.say("  %s pid %d (%s): held %s  busy %s  idle %s (rates); CPU %s cores; NVML process utilization "
              "median %s, mean %s over %d readings" % (
                  role, pid, ra.get("process.executable.name", "?"), fmt(f["held"]), fmt(f["busy"]), fmt(f["idle"]),
                  fmt(f["cpu"]), fmt(f["util_median"]), fmt(f["util_mean"]), len(util)))
        return f

    # A: a 50 %-duty matmul.
    w = window("A")
    if w is None:
        r.check("A: the phase ran", False, "no line A in phases.txt")
    else:
        w0, w1, pids = w
        f = gpu_figures("A", w0, w1)
        for role, p in sorted(pids.items()):
            process_figures(role, p, w0, w1)
        diff = None if f["active"] is None or f["sm"] is None else f["active"] - f["sm"]
        r.check("A: rate(nvidia.gpu.active.time) = GPM SM activity within %.2f" % a.active_tol,
                diff is not None and abs(diff) <= a.active_tol,
                "active rate %s vs GPM %s (diff %s); known baseline %s" % (
                    fmt(f["active"], 4), fmt(f["sm"], 4), fmt(diff, 4), BASELINE_SM_ACTIVITY))
        r.check("A: held rate 1.0 and idle rate 0 while the matmul runs",
                within(f["held"], 1.0, a.rate_tol) and within(f["idle"], 0.0, a.rate_tol),
                "held %s, idle %s" % (fmt(f["held"]), fmt(f["idle"])))

    # B: a process that holds memory and sleeps.
    w = window("B")
    if w is None:
        r.check("B: the phase ran", False, "no line B in phases.txt")
    else:
        w0, w1, pids = w
        f = gpu_figures("B", w0, w1)
        pf = {p: process_figures(role, p, w0, w1) for role, p in sorted(pids.items())}
        inc_idle, inc_held = d.increase("nvidia.gpu.idle.time", w0, w1), d.increase("nvidia.gpu.held.time", w0, w1)
        idle_of_held = inc_idle / inc_held if inc_idle is not None and inc_held else None
        r.check("B: held rate 1.0 within %.2f" % a.rate_tol, within(f["held"], 1.0, a.rate_tol),
                "held %s (increase %s s in %.1f s)" % (fmt(f["held"]), fmt(inc_held), (w1 - w0) / 1e9))
        r.check("B: idle rate (idle / held) 1.0 within %.2f" % a.rate_tol, within(idle_of_held, 1.0, a.rate_tol),
                "idle / held %s (idle +%s s, held +%s s); GPM SM activity %s, idle threshold 0.05 by default" % (
                    fmt(idle_of_held), fmt(inc_idle), fmt(inc_held), fmt(f["sm"], 4)))
        for p, pfi in pf.items():
            pidle = pfi["idle"] / pfi["held"] if pfi["idle"] is not None and pfi["held"] else None
            r.check("B: the sleeping process's held rate 1.0 and its idle / held 1.0",
                    within(pfi["held"], 1.0, a.rate_tol) and within(pidle, 1.0, a.rate_tol),
                    "pid %d: held %s, idle / held %s" % (p, fmt(pfi["held"]), fmt(pidle)))

    # C: no process on the GPU.
    w = window("C")
    if w is None:
        r.check("C: the phase ran", False, "no line C in phases.txt")
    else:
        w0, w1, _ = w
        f = gpu_figures("C", w0, w1)
        inc = d.increase("nvidia.gpu.held.time", w0, w1)
        seen = d.pids_in(w0, w1)
        r.check("C: no process, so the held counter does not grow",
                inc is not None and abs(inc) < 1e-6 and not seen,
                "held +%s s over %.1f s (rate %s), %d s after the previous phase's process exited; "
                "processes seen: %s" % (fmt(inc, 6), (w1 - w0) / 1e9, fmt(f["held"], 4), int(a.skip), seen or "none"))

    # D: the matmul and the spinning block share the GPU.
    w = window("D")
    if w is None:
        r.check("D: the phase ran", False, "no line D in phases.txt")
    else:
        w0, w1, pids = w
        f = gpu_figures("D", w0, w1)
        pf = {role: process_figures(role, p, w0, w1) for role, p in sorted(pids.items())}
        busy = [pfi["busy"] for pfi in pf.values()]
        total = None if None in busy or not busy else sum(busy)
        diff = None if total is None or f["busy"] is None else total - f["busy"]
        r.check("D: the processes' busy rates sum to the GPU's within %.2f" % a.sum_tol,
                len(busy) == 2 and diff is not None and abs(diff) <= a.sum_tol,
                "%s = %s vs the GPU's %s (diff %s)" % (
                    " + ".join("%s %s" % (role, fmt(pfi["busy"])) for role, pfi in pf.items()),
                    fmt(total), fmt(f["busy"]), fmt(diff)))
        share = nvml_share = None
        if "workload" in pf and "spin" in pf and total:
            share = pf["workload"]["busy"] / total
            m_w, m_s = pf["workload"]["util_mean"], pf["spin"]["util_mean"]
            if m_w is not None and m_s is not None and m_w + m_s > 0:
                nvml_share = m_w / (m_w + m_s)
        medians = ", ".join("%s %s" % (role, fmt(pfi["util_median"])) for role, pfi in pf.items())
        r.check("D: the busy split (matmul / spinning block) is NVML's within %.2f" % a.split_tol,
                share is not None and nvml_share is not None and abs(share - nvml_share) <= a.split_tol,
                "busy split %s/%s; NVML's per-process utilization: medians %s, split of the means %s/%s; known %s" % (
                    fmt(None if share is None else 100 * share, 0), fmt(None if share is None else 100 * (1 - share), 0),
                    medians, fmt(None if nvml_share is None else 100 * nvml_share, 0),
                    fmt(None if nvml_share is None else 100 * (1 - nvml_share), 0), BASELINE_SPLIT))
        diff = None if f["active"] is None or f["sm"] is None else f["active"] - f["sm"]
        r.check("D: rate(nvidia.gpu.active.time) = GPM SM activity within %.2f" % a.active_tol,
                diff is not None and abs(diff) <= a.active_tol,
                "active rate %s vs GPM %s (diff %s)" % (fmt(f["active"], 4), fmt(f["sm"], 4), fmt(diff, 4)))
        held = [pfi["held"] for pfi in pf.values()]
        r.check("D: both processes held the GPU throughout (held rates 1.0)",
                len(held) == 2 and all(within(h, 1.0, a.rate_tol) for h in held),
                ", ".join("%s %s" % (role, fmt(pfi["held"])) for role, pfi in pf.items()))

    r.say("")
    r.say("RESULT: %s (%d of %d checks failed)" % ("PASS" if not r.failed else "FAIL", r.failed, r.checks))
    with open(os.path.join(a.run_dir, "report.txt"), "w") as f:
        f.write("\n".join(r.lines) + "\n")
    return 1 if r.failed else 0


if __name__ == "__main__":
    sys.exit(main())
