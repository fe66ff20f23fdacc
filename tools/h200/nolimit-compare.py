#!/usr/bin/env python3
"""Checks the no-limit diagnosis run on a real GPU (nolimit-run.sh, issue 23).

Reads RUN_DIR/metrics.jsonl and RUN_DIR/phases.txt as waste-compare.py does
(its reader is used here), and prints per phase, from its start + --skip (3)
seconds to its end: SM activity (GPM, the time-weighted mean of
nvidia.gpu.sm.activity, and rate(nvidia.gpu.active.time)), the GPU's busy
rate, and the GPU process's CPU (rate of process.cpu.time, user + system,
in cores). Then, unless --no-promtool, the state the shipped diagnosis rules
(--rules, deploy/prometheus/rules.yaml) give: each phase's points, resampled
at 1 s and named as the collector's prometheus exporter names them (with
the labels the rules read: hw_id, process_pid, cpu_mode), go to a promtool
test of their own, evaluated every second at the phase's end. A phase
stands alone, as a holder of its first minute does: its 5-minute figures
are its own samples'. Writes RUN_DIR/report.txt; exits 1 on a FAIL, 2 when
an input or promtool is missing.

Known truths (PASS/FAIL):
  loader   the process at >= 0.9 core, activity < 0.5: input_bound
  batch50  activity >= 0.7 (0.965 measured before): gpu_bound
  sleep    the process under 0.1 core, activity < 0.05: idle
  sync1    reported, not checked: the figure docs/design/waste.md's gpu_bound row
           cites, and which side of the gpu_bound bound it reads
"""
import argparse
import json
import os
import re
import runpy
import shutil
import subprocess
import sys
import tempfile
import types

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))


# waste-compare.py's reader (its name is no module name).
wc = types.SimpleNamespace(**runpy.run_path(os.path.join(HERE, "waste-compare.py"), run_name="waste_compare"))
fmt = wc.fmt

STATES = {1: "memory_pressure", 2: "idle", 3: "input_bound", 4: "gpu_bound", 5: "underused"}
TRUTH = {"loader": "input_bound", "batch50": "gpu_bound", "sleep": "idle"}
GPU_BOUND = 0.7  # the chart's default gpuBound.activity
# The receiver's metrics the diagnosis reads, as the prometheus exporter names them.
PROM_SUMS = {
    "nvidia.gpu.held.time": "nvidia_gpu_held_time_seconds_total",
    "nvidia.gpu.busy.time": "nvidia_gpu_busy_time_seconds_total",
    "nvidia.gpu.active.time": "nvidia_gpu_active_time_seconds_total",
    "nvidia.gpu.idle.time": "nvidia_gpu_idle_time_seconds_total",
    "nvidia.gpu.process.held.time": "nvidia_gpu_process_held_time_seconds_total",
    "nvidia.gpu.process.busy.time": "nvidia_gpu_process_busy_time_seconds_total",
    "nvidia.gpu.process.idle.time": "nvidia_gpu_process_idle_time_seconds_total",
    "process.cpu.time": "process_cpu_time_seconds_total",
}
PROM_GAUGES = {"hw.gpu.memory.usage": "hw_gpu_memory_usage_bytes", "hw.gpu.memory.limit": "hw_gpu_memory_limit_bytes"}
QUERIES = {
    "code": "gpu_holder:nvidia_gpu_diagnosis_code:5m",
    "candidate": "gpu_holder:nvidia_gpu_diagnosis_candidate:5m",
    "activity": "gpu_holder:nvidia_gpu_activity:5m",
    "process_cpu": "gpu_holder:nvidia_gpu_process_cpu:5m",
    "cpu_of_limit": "gpu_holder:nvidia_gpu_cpu_of_limit:5m",
    "busy": "sum by (hw_id) (increase(nvidia_gpu_busy_time_seconds_total[5m]))"
            " / sum by (hw_id) (increase(nvidia_gpu_held_time_seconds_total[5m]))",
}


def label_str(labels):
    return ",".join('%s="%s"' % (k, v) for k, v in sorted(labels.items()))


def prom_series(d, pid_roles, w0, w1):
    """{series selector: [value or None at each second of [w0, w1]]}: the
    GPU's series and its phase processes', read from d (a wc.Data)."""
    steps = list(range(w0, w1 + 1, 1_000_000_000))
    grouped = {}  # (prom name, labels) -> [(start, pts)]
    for (pid, name, da, start), pts in d.sums.items():
        if name not in PROM_SUMS or (pid is not None and pid not in pid_roles):
            continue
        labels = {"hw_id": d.uuid}
        if pid is not None:
            labels["process_pid"] = str(pid)
        labels.update({k.replace(".", "_"): v for k, v in da})
        grouped.setdefault((PROM_SUMS[name], label_str(labels)), []).append((start, pts))
    out = {}
    for (name, labels), streams in grouped.items():
        first = min(pts[0][0] for _, pts in streams)
        last = max(pts[-1][0] for _, pts in streams)
        out["%s{%s}" % (name, labels)] = [
            sum(wc.stream_value(s, pts, t) for s, pts in streams) if first <= t <= last else None for t in steps]
    for (pid, name, da), pts in d.gauges.items():
        if name in PROM_GAUGES and pid is None:
            vals = []
            for t in steps:
                before = [v for (tp, v) in pts if tp <= t]
                vals.append(before[-1] if before else None)
            out['%s{hw_id="%s"}' % (PROM_GAUGES[name], d.uuid)] = vals
    return out


def promtool_phase(promtool, rules, series, seconds, workdir):
    """Each query of QUERIES at the phase's end: {key: [(labels, value)]}."""
    lines = ["rule_files: [%s]" % json.dumps(os.path.abspath(rules)), "evaluation_interval: 1s", "tests:",
             "  - interval: 1s", "    input_series:"]
    for sel, vals in sorted(series.items()):
        lines.append("      - series: %s" % json.dumps(sel))
        lines.append("        values: %s" % json.dumps(" ".join("_" if v is None else "%.6f" % v for v in vals)))
    lines.append("    promql_expr_test:")
    for q in QUERIES.values():
        # No sample is expected: promtool prints what each query gave.
        lines += ["      - expr: %s" % json.dumps(q), "        eval_time: %ds" % seconds, "        exp_samples: []"]
    path = os.path.join(workdir, "phase_test.yaml")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    res = subprocess.run([promtool, "test", "rules", path], capture_output=True, text=True)
    got, expr = {}, None
    for line in (res.stdout + res.stderr).splitlines():
        m = re.match(r'\s*expr: (".*"), time: ', line)
        if m:
            expr = json.loads(m.group(1))
            continue
        m = re.match(r"\s*got: (.*)$", line)
        if m and expr is not None:
            got[expr] = [(lab, float(v)) for lab, v in re.findall(r"\{([^}]*)\} (\S+?)(?:,|$)", m.group(1))]
            expr = None
    return {k: got.get(q, []) for k, q in QUERIES.items()}, res


def one(vals):
    """The single value of a query for the phase's one holder, or None."""
    return vals[0][1] if len(vals) == 1 else None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("run_dir", help="the folder with metrics.jsonl and phases.txt")
    ap.add_argument("--gpu-index", type=int, default=int(os.environ.get("GPU_INDEX", "0")))
    ap.add_argument("--skip", type=float, default=3.0, help="seconds left out at each phase's start")
    ap.add_argument("--rules", default=os.path.join(REPO, "deploy", "prometheus", "rules.yaml"))
    ap.add_argument("--promtool", default=shutil.which("promtool") or "promtool")
    ap.add_argument("--no-promtool", action="store_true", help="the figures only (the GPU machine has no promtool)")
    a = ap.parse_args()

    if not a.no_promtool and not os.path.exists(a.rules):
        print("FAIL  input: the rules file %s is missing" % a.rules)
        return 2
    if not a.no_promtool and not shutil.which(a.promtool):
        print("FAIL  input: promtool not found (%s); --no-promtool for the figures alone" % a.promtool)
        return 2
    run = wc.read_run(a.run_dir, a.gpu_index)
    if run is None:
        return 2
    d, phases = run
    r = wc.Report()
    r.say("GPU %d (%s); rules %s" % (a.gpu_index, d.uuid, "not evaluated (--no-promtool)" if a.no_promtool else a.rules))
    r.check("the GPU's points are in the file", d.uuid is not None and d.has("nvidia.gpu.held.time"),
            "hw.id %s" % d.uuid)
    figures = {}
    for name in ("loader", "batch50", "sync1", "sleep"):
        ph = phases.get(name)
        if ph is None:
            r.check("%s: the phase ran" % name, False, "no line %s in phases.txt" % name)
            continue
        w0, w1 = ph["start"] + int(a.skip * 1e9), ph["end"]
        pid = ph["pids"].get(name)
        f = {"sm": d.weighted_mean("nvidia.gpu.sm.activity", w0, w1),
             "active": d.rate("nvidia.gpu.active.time", w0, w1),
             "busy": d.rate("nvidia.gpu.busy.time", w0, w1),
             "held": d.rate("nvidia.gpu.held.time", w0, w1),
             "util": d.weighted_mean("hw.gpu.utilization", w0, w1, attrs={"hw.gpu.task": "general"})}
        cpu = [d.rate("process.cpu.time", w0, w1, pid=pid, attrs={"cpu.mode": m}) for m in ("user", "system")]
        f["cpu"] = None if None in cpu else sum(cpu)
        f["pheld"] = d.rate("nvidia.gpu.process.held.time", w0, w1, pid=pid)
        r.say("")
        r.say("Phase %s (pid %s), %.1f s measured: GPM SM activity %s (rate of active %s), busy %s, utilization %s, "
              "held %s; the process's CPU %s cores (held %s)" % (
                  name, pid, (w1 - w0) / 1e9, fmt(f["sm"]), fmt(f["active"]), fmt(f["busy"]), fmt(f["util"]),
                  fmt(f["held"]), fmt(f["cpu"]), fmt(f["pheld"])))
        if not a.no_promtool:
            with tempfile.TemporaryDirectory() as tmp:
                got, res = promtool_phase(a.promtool, a.rules, prom_series(d, {pid}, w0, w1), int((w1 - w0) / 1e9), tmp)
            if res.returncode not in (0, 1) or "error" in res.stderr.lower():
                r.check("%s: promtool evaluated the rules" % name, False, (res.stdout + res.stderr)[-800:])
                continue
            code = one(got["code"])
            f["state"] = STATES.get(int(code)) if code is not None else None
            cand = one(got["candidate"])
            r.say("  the rules: state %s (candidate %s); activity %s, busy %s, process CPU %s cores, "
                  "cpu_of_limit %s; holders: %s" % (
                      f["state"], STATES.get(int(cand)) if cand is not None else None, fmt(one(got["activity"])),
                      fmt(one(got["busy"])), fmt(one(got["process_cpu"])), fmt(one(got["cpu_of_limit"])),
                      "; ".join(re.sub(r'__name__="[^"]*", ', "", lab) for lab, _ in got["code"]) or "none"))
        figures[name] = f

    def check(name, ok, detail):
        if name in figures:
            r.check(name, ok, detail)

    f = figures.get("loader", {})
    check("loader", f.get("cpu") is not None and f["cpu"] >= 0.9 and f.get("sm") is not None and f["sm"] < 0.5,
          "the process at >= 0.9 core and SM activity < 0.5: CPU %s, SM activity %s" % (fmt(f.get("cpu")), fmt(f.get("sm"))))
    f = figures.get("batch50", {})
    check("batch50", f.get("sm") is not None and f["sm"] >= GPU_BOUND,
          "SM activity >= %.2f (0.965 measured before): %s" % (GPU_BOUND, fmt(f.get("sm"))))
    f = figures.get("sleep", {})
    check("sleep", f.get("cpu") is not None and f["cpu"] < 0.1 and f.get("sm") is not None and f["sm"] < 0.05,
          "the process under 0.1 core, SM activity < 0.05: CPU %s, SM activity %s" % (fmt(f.get("cpu")), fmt(f.get("sm"))))
    if not a.no_promtool:
        for name, want in TRUTH.items():
            if name in figures:
                r.check("%s: the rules say %s" % (name, want), figures[name].get("state") == want,
                        "state %s" % figures[name].get("state"))
    b, s = figures.get("batch50", {}).get("sm"), figures.get("sync1", {}).get("sm")
    r.say("")
    r.say("gpu_bound bound %.2f: batch50 %s (%s), sync1 %s (%s)%s" % (
        GPU_BOUND, fmt(b), "at or above" if b is not None and b >= GPU_BOUND else "under",
        fmt(s), "at or above" if s is not None and s >= GPU_BOUND else "under",
        "; sync1 state %s" % figures.get("sync1", {}).get("state") if not a.no_promtool else ""))
    with open(os.path.join(a.run_dir, "report.txt"), "w") as out:
        out.write("\n".join(r.lines) + "\n")
    r.say("%d checks, %d failed" % (r.checks, r.failed))
    return 1 if r.failed else 0


if __name__ == "__main__":
    sys.exit(main())
