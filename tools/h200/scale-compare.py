#!/usr/bin/env python3
"""Reads the issue-19 run (scale-run.sh) and writes scale.md and scale.json:
the cost against the number of GPUs with a linearity verdict, the p99 wall
time of a scrape against the receiver's default `timeout`, the RSS, and each
known truth per GPU, PASS or FAIL with its figures.

Usage: scale-compare.py [--out DIR] [--repo DIR] RUN_DIR [RUN_DIR ...]
Several RUN_DIRs (e.g. the PART=cost and the PART=truth calls) are merged:
each part is taken from the first RUN_DIR that has it. Exits 1 when a truth
fails, 2 when no RUN_DIR has anything to read, else 0 (a cost that is not
linear is a finding, not a failure).

Where the figures come from:
- collector CPU per second: /proc/<pid>/stat over the 60 s (as cost.py), and
  each second's CPU from the threads' schedstat (p50/p99: one scrape each);
- the scrape's wall time per N: the collector's own span of each scrape
  (scraperhelper's "scraper/nvml/ScrapeMetrics", the receiver's scrape
  function from start to end), sent as its internal traces to a sink. The
  receiver's probe (receivercost.test, TestH200ScrapeCost) builds its
  scraper from createDefaultConfig, without `devices:`, so it always reads
  every GPU of the machine: it is reported once, for all N GPUs, beside the
  spans' figure for the same N;
- the truths: the collector's file exporter (nvml at 1 s, every GPU, its
  defaults), read with waste-compare.py's Data, against nvidia-smi.
"""
import argparse
import csv
import importlib.util
import json
import os
import re
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SPAN_NAME = "scraper/nvml/ScrapeMetrics"


def _load(name, file):
    spec = importlib.util.spec_from_file_location(name, os.path.join(HERE, file))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


wc = _load("waste_compare", "waste-compare.py")
fmt, within = wc.fmt, wc.within

# The known truths (docs/runs/h200-runs.md): the 50 %-duty matmul reads ~0.5
# windowed utilization (0.474-0.488 measured) and 0.35-0.55 SM activity
# (truth-compare.py; 0.439-0.452 measured); one spinning block reads ~1.0
# (0.990-0.999) and under 0.02 SM activity (0.0076, 1 SM of 132).
UTIL_TRUTH = {"matmul": 0.5, "spin": 1.0}
UTIL_TOL = 0.05
SPIN_SM_MAX = 0.02
MATMUL_SM = (0.35, 0.55)
RATE_TOL = 0.02           # waste-compare.py's --rate-tol and --active-tol
IDLE_THRESHOLD = 0.05     # config.go DefaultIdleThreshold
LINEAR_TOL = 0.25         # cost per GPU within 25 % of the 1-GPU figure
AFFINE_RESIDUAL = 0.10    # an affine fit within 10 % of every count
RUN_SPREAD_MS = 0.6       # the collector's CPU per second between runs of one build (docs/runs/h200-runs.md)
SKIP_S = 3                # the truth window starts 3 s after the collector's warm-up


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else None


def read_text(path):
    with open(path) as f:
        return f.read()


def read_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


# ---------------------------------------------------------------- the timeout

def default_timeout(repo):
    """The receiver's default scrape timeout, read from its source: Timeout
    is scraperhelper's (0 unless createDefaultConfig sets cc.Timeout), and 0
    means the collection interval (config.go, session.go's scrapeTimeout),
    whose default createDefaultConfig sets (factory.go)."""
    unit = {"Millisecond": 0.001, "Second": 1.0, "Minute": 60.0}
    rx = r"cc\.%s\s*=\s*(\d+)\s*\*\s*time\.(Millisecond|Second|Minute)"
    try:
        factory = read_text(os.path.join(repo, "receiver/nvmlreceiver/factory.go"))
        config = read_text(os.path.join(repo, "receiver/nvmlreceiver/config.go"))
    except OSError as e:
        return {"error": "cannot read the receiver's source: %s" % e}
    m = re.search(rx % "CollectionInterval", factory)
    if not m:
        return {"error": "factory.go: no default collection interval (cc.CollectionInterval = N * time.Unit)"}
    interval = int(m.group(1)) * unit[m.group(2)]
    t = re.search(rx % "Timeout", factory)
    timeout = int(t.group(1)) * unit[t.group(2)] if t else 0.0
    zero_is_interval = "0 means the collection interval" in config
    if timeout == 0 and not zero_is_interval:
        return {"error": "config.go no longer says that timeout 0 means the collection interval"}
    eff = timeout if timeout > 0 else interval
    return {"collection_interval_s": interval, "timeout_s": timeout, "effective_s": eff,
            "source": "factory.go: collection_interval %gs, timeout %s; config.go: 0 means the collection interval"
                      % (interval, "%gs" % timeout if timeout else "unset (0)")}


# ---------------------------------------------------------------- the cost

def read_spans(path):
    """(start ns, end ns) of each scrape span in the sink's file."""
    out = []
    try:
        f = open(path)
    except OSError:
        return out
    with f:
        for line in f:
            if not line.strip():
                continue
            try:
                doc = json.loads(line)
            except ValueError:
                continue
            for rs in doc.get("resourceSpans", []):
                for ss in rs.get("scopeSpans", []):
                    for sp in ss.get("spans", []):
                        if sp.get("name") == SPAN_NAME:
                            out.append((int(sp["startTimeUnixNano"]), int(sp["endTimeUnixNano"])))
    return sorted(out)


def linearity(points, tol=LINEAR_TOL, affine_tol=AFFINE_RESIDUAL):
    """points: {n GPUs: cost}. Per-GPU cost against the 1-GPU figure, and a
    least-squares fit cost = a + b n."""
    ns = sorted(n for n, v in points.items() if v is not None)
    res = {"counts": ns}
    if len(ns) < 2:
        res["verdict"] = "not measurable: one GPU count only"
        return res
    xs, ys = ns, [points[n] for n in ns]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
    a = my - b * mx
    ss_tot = sum((y - my) ** 2 for y in ys)
    ss_res = sum((y - (a + b * x)) ** 2 for x, y in zip(xs, ys))
    res.update({"slope_per_gpu": b, "intercept": a, "r2": 1 - ss_res / ss_tot if ss_tot else 1.0})
    base_n = ns[0]
    base = points[base_n] / base_n
    res["base_n"] = base_n
    ratios = {n: (points[n] / n) / base if base else None for n in ns}
    res["per_gpu"] = {n: points[n] / n for n in ns}
    res["per_gpu_ratio"] = ratios
    worst = max((abs(r - 1) for r in ratios.values() if r is not None), default=None)
    residual = max(abs(points[n] - (a + b * n)) / points[n] for n in ns if points[n])
    res["max_affine_residual"] = residual
    if worst is None:
        res["verdict"] = "not measurable: the %d-GPU figure is 0" % base_n
    elif worst <= tol:
        res["verdict"] = "linear: cost per GPU within %d %% of the %d-GPU figure at every count" % (100 * tol, base_n)
    elif b <= 0:
        res["verdict"] = "does not grow with the GPUs: %.3g at %d, %.3g at %d" % (points[base_n], base_n, points[ns[-1]], ns[-1])
    elif any(r > 1 + tol for r in ratios.values()):
        res["verdict"] = ("NOT linear (super-linear): cost per GPU up to %.2fx the %d-GPU figure"
                          % (max(ratios.values()), base_n))
    elif len(ns) == 2:
        res["verdict"] = ("grows less than linearly (per GPU %.2fx the %d-GPU figure at %d: a fixed part); two counts "
                          "cannot tell more" % (ratios[ns[1]], base_n, ns[1]))
    elif residual <= affine_tol and a > 0:
        res["verdict"] = ("linear with a fixed part: cost = %.3g + %.3g per GPU (every count within %d %% of the fit); "
                          "per GPU it falls to %.2fx the %d-GPU figure" % (a, b, 100 * affine_tol,
                                                                           min(ratios.values()), base_n))
    else:
        res["verdict"] = "NOT linear (sub-linear, and not a fixed part plus a per-GPU slope): per GPU %.2f-%.2fx" % (
            min(ratios.values()), max(ratios.values()))
    return res


def _counts(run_dir, prefix):
    out = {}
    for name in os.listdir(run_dir):
        m = re.fullmatch(prefix + r"-n(\d+)\.json", name)
        if m:
            out[int(m.group(1))] = read_json(os.path.join(run_dir, name)) or {}
    return out


def cost_rows(run_dir):
    """n -> the cost run's figures (cost-n*.json: no traces) and nvidia-smi's."""
    rows = {}
    for n, c in _counts(run_dir, "cost").items():
        s = read_json(os.path.join(run_dir, "smi-n%d.json" % n)) or {}
        row = {"n": n, "devices": c.get("devices"), "error": c.get("error"), "exit": c.get("exit")}
        if "window_ns" in c:
            each = c.get("cpu_ms_each_s") or []
            row.update({
                "cpu_ms_per_s": c.get("cpu_ms_per_s"),
                "cpu_ms_each_s_p50": pct(each, 0.5), "cpu_ms_each_s_p99": pct(each, 0.99), "seconds": c.get("seconds"),
                "rss_mib_end": c.get("rss_mib_end"), "rss_mib_max": c.get("rss_mib_max"),
                "rss_anon_kib": (c.get("memory") or {}).get("RssAnon"),
                "rss_file_kib": (c.get("memory") or {}).get("RssFile"),
            })
        row.update({"smi_cpu_ms_p50": s.get("cpu_ms_p50"), "smi_wall_ms_p50": s.get("wall_ms_p50"),
                    "smi_fields": s.get("fields")})
        rows[n] = row
    return rows


def wall_rows(run_dir):
    """n -> the scrape spans' wall times in that wall run's window
    (wall-n*.json, spans.jsonl), and that run's CPU with the traces on."""
    runs = _counts(run_dir, "wall")
    if not runs:
        return {}
    spans = read_spans(os.path.join(run_dir, "spans.jsonl"))
    rows = {}
    for n, c in runs.items():
        row = {"n": n, "wall_error": c.get("error")}
        if "window_ns" in c:
            w0, w1 = c["window_ns"]
            walls = [(e - b) / 1e6 for b, e in spans if w0 <= b <= w1]
            row.update({"scrapes": len(walls), "wall_ms_p50": pct(walls, 0.5), "wall_ms_p99": pct(walls, 0.99),
                        "wall_ms_max": max(walls, default=None), "cpu_ms_per_s_traced": c.get("cpu_ms_per_s")})
        rows[n] = row
    return rows


# ---------------------------------------------------------------- the truths

def read_uuids(path):
    out = {}
    with open(path) as f:
        for row in csv.reader(f):
            if len(row) >= 2:
                out[int(row[0].strip())] = row[1].strip()
    return out


def read_loads(path):
    """index -> {"kind": matmul|spin, "pid": pid, "holders": [pids]}."""
    out = {}
    with open(path) as f:
        for line in f:
            p = line.split()
            if len(p) != 3:
                continue
            i, kind, pid = int(p[0]), p[1], int(p[2])
            g = out.setdefault(i, {"kind": None, "pid": None, "holders": []})
            if kind == "holder":
                g["holders"].append(pid)
            else:
                g["kind"], g["pid"] = kind, pid
    return out


def read_apps(path):
    """(uuid, pid) -> [MiB] from nvidia-smi --query-compute-apps samples."""
    out = {}
    with open(path) as f:
        for row in csv.reader(f):
            if len(row) < 4:
                continue
            try:
                out.setdefault((row[1].strip(), int(row[2])), []).append(float(row[3]))
            except ValueError:
                continue
    return out


def read_truth_metrics(path, indices):
    datas = {i: wc.Data(i) for i in indices}
    hw_ids = {i: set() for i in indices}
    with open(path) as f:
        for line in f:
            if not line.strip():
                continue
            doc = json.loads(line)
            for rm in doc.get("resourceMetrics", []):
                ra = wc.attrs_of(rm.get("resource", {}).get("attributes"))
                if "process.pid" not in ra and "hw.parent" not in ra and "hw.id" in ra:
                    i = int(ra.get("nvidia.gpu.index", -1))
                    if i in hw_ids:
                        hw_ids[i].add(ra["hw.id"])
            for d in datas.values():
                d.add(doc)
    for d in datas.values():
        for series in (d.sums, d.gauges):
            for pts in series.values():
                pts.sort()
    return datas, hw_ids


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def truth_checks(i, uuid, load, d, hw_ids, apps, w0, w1):
    """The truths of one GPU: [(name, ok, detail)]."""
    kind = load.get("kind")
    checks = []

    def check(name, ok, detail):
        checks.append({"check": name, "ok": bool(ok), "detail": detail})

    check("hw.id = nvidia-smi's UUID", hw_ids == {uuid},
          "hw.id %s, nvidia-smi %s" % (", ".join(sorted(hw_ids)) or "none", uuid))

    util = [v for _, v in d.gauge_points("hw.gpu.utilization", w0, w1, attrs={"hw.gpu.task": "general"})]
    sm = [v for _, v in d.gauge_points("nvidia.gpu.sm.activity", w0, w1)]
    u, s = median(util), median(sm)
    truth = UTIL_TRUTH.get(kind)
    check("windowed utilization within %.2f of the truth" % UTIL_TOL,
          truth is not None and u is not None and abs(u - truth) <= UTIL_TOL,
          "median %s of %d scrapes (%s-%s) vs %s (%s)" % (
              fmt(u), len(util), fmt(min(util, default=None)), fmt(max(util, default=None)), fmt(truth), kind))
    if kind == "spin":
        check("SM activity under %.2f for one spinning block" % SPIN_SM_MAX, s is not None and s < SPIN_SM_MAX,
              "median %s of %d scrapes" % (fmt(s, 4), len(sm)))
    else:
        check("SM activity %.2f-%.2f for the 50 %%-duty matmul" % MATMUL_SM,
              s is not None and MATMUL_SM[0] <= s <= MATMUL_SM[1], "median %s of %d scrapes" % (fmt(s, 4), len(sm)))

    # Process memory, to the MiB, for every process nvidia-smi lists on the GPU.
    smi_pids = sorted(p for (u_, p) in apps if u_ == uuid)
    started = [load["pid"]] + load.get("holders", []) if load.get("pid") else load.get("holders", [])
    diffs, missing, lines = [], [], []
    for p in smi_pids:
        ref = median(apps[(uuid, p)])
        got = [v for (pid, name, _, _), pts in d.sums.items()
               if pid == p and name == "nvidia.gpu.process.memory.usage" for t, v in pts if w0 <= t <= w1]
        mib = median(got)
        if mib is None:
            missing.append(p)
            continue
        mib /= 2 ** 20
        diffs.append(abs(mib - ref))
        lines.append("%d %.1f/%.0f" % (p, mib, ref))
    not_listed = sorted(set(started) - set(smi_pids))
    check("process memory = nvidia-smi's to the MiB, every process",
          bool(smi_pids) and not missing and not not_listed and max(diffs, default=1) < 1.0,
          "%d processes on the GPU per nvidia-smi (started %d%s); max abs diff %s MiB; missing from the receiver: %s; "
          "pid receiver/nvidia-smi MiB: %s" % (
              len(smi_pids), len(started), ", not listed: %s" % not_listed if not_listed else "",
              fmt(max(diffs, default=None), 2), missing or "none", ", ".join(lines[:3]) + (" ..." if len(lines) > 3 else "")))

    energy = [(start, pts) for (pid, name, _, start), pts in d.sums.items() if pid is None and name == "hw.energy"]
    npts = sum(len(pts) for _, pts in energy)
    mono = all(b >= a for _, pts in energy for (_, a), (_, b) in zip(pts, pts[1:]))
    inc = sum(pts[-1][1] - pts[0][1] for _, pts in energy) if energy else None
    check("energy monotonic", npts >= 2 and mono and inc is not None and inc > 0,
          "%d points in %d stream(s), +%s J" % (npts, len(energy), fmt(inc, 1)))

    f = {k: d.rate("nvidia.gpu.%s.time" % k, w0, w1) for k in ("held", "busy", "active", "idle")}
    wu = d.weighted_mean("hw.gpu.utilization", w0, w1, attrs={"hw.gpu.task": "general"})
    ws = d.weighted_mean("nvidia.gpu.sm.activity", w0, w1)
    idle_truth = None if ws is None else (1.0 if ws < IDLE_THRESHOLD else 0.0)
    faults = d.monotonic_faults()
    ok = (within(f["held"], 1.0, RATE_TOL) and f["busy"] is not None and wu is not None
          and abs(f["busy"] - wu) <= RATE_TOL and f["active"] is not None and ws is not None
          and abs(f["active"] - ws) <= RATE_TOL and within(f["idle"], idle_truth, RATE_TOL) and not faults)
    check("waste counters: held 1, busy = utilization, active = SM activity, idle as SM activity < %.2f" % IDLE_THRESHOLD,
          ok, "held %s, busy %s vs utilization %s, active %s vs SM activity %s, idle %s vs %s; %s" % (
              fmt(f["held"]), fmt(f["busy"]), fmt(wu), fmt(f["active"], 4), fmt(ws, 4), fmt(f["idle"]),
              fmt(idle_truth), "counters only grow" if not faults else "; ".join(faults[:2])))

    holders = load.get("holders", [])
    hr = {p: (d.rate("nvidia.gpu.process.held.time", w0, w1, pid=p), d.rate("nvidia.gpu.process.busy.time", w0, w1, pid=p))
          for p in holders}
    held = [h for h, _ in hr.values() if h is not None]
    bad = [p for p, (h, _) in hr.items() if not within(h, 1.0, RATE_TOL)]
    check("each memory holder held its GPU throughout (held rate 1)", bool(holders) and not bad,
          "%d holders; held rates %s-%s; off: %s" % (
              len(holders), fmt(min(held, default=None)), fmt(max(held, default=None)), bad or "none"))
    # A holder runs nothing, but the receiver splits a window's busy time
    # evenly among the GPU's processes when NVML gives none of them a share
    # (accounting.go): reported, not judged.
    busy = [b for _, b in hr.values() if b is not None]
    checks.append({"check": "memory holders' busy rate (0 unless NVML gave no per-process share)", "ok": True,
                   "info": True, "detail": "max %s, sum %s over %d holders; the load's %s" % (
                       fmt(max(busy, default=None)), fmt(sum(busy) if busy else None), len(busy),
                       fmt(d.rate("nvidia.gpu.process.busy.time", w0, w1, pid=load.get("pid")) if load.get("pid") else None))})
    return checks


TRUTH_SETS = (("truth", "", "the truths per GPU"),
              ("truth_swap", "-swap", "the truths per GPU, each GPU's load swapped for the other kind"))


def truths(run_dir, tag=""):
    """The truth run truth{tag}-*: per GPU its checks; None and the missing
    files when it is not there."""
    j = lambda n: os.path.join(run_dir, n)  # noqa: E731
    loads_file = "truth%s-loads.txt" % tag
    if not os.path.exists(j(loads_file)) and not tag:
        loads_file = "loads.txt"
    need = ["uuids.csv", loads_file] + ["truth%s-%s" % (tag, n) for n in ("metrics.jsonl", "window.txt", "apps.csv")]
    missing = [n for n in need if not os.path.exists(j(n))]
    if missing:
        return None, missing
    uuids = read_uuids(j("uuids.csv"))
    loads = read_loads(j(loads_file))
    t0, t1 = (int(x) for x in read_text(j("truth%s-window.txt" % tag)).split()[:2])
    w0, w1 = t0 + int(SKIP_S * 1e9), t1
    apps = read_apps(j("truth%s-apps.csv" % tag))
    datas, hw_ids = read_truth_metrics(j("truth%s-metrics.jsonl" % tag), sorted(uuids))
    out = {}
    for i in sorted(uuids):
        out[i] = {"uuid": uuids[i], "load": loads.get(i, {}).get("kind"),
                  "checks": truth_checks(i, uuids[i], loads.get(i, {}), datas[i], hw_ids[i], apps, w0, w1)}
    return {"window_s": (w1 - w0) / 1e9, "gpus": out}, []


def truth_failures(res):
    return [(key, i, c["check"]) for key, _, _ in TRUTH_SETS if key in res
            for i, g in res[key]["gpus"].items() for c in g["checks"] if not c["ok"] and not c.get("info")]


# ---------------------------------------------------------------- the report

def analyse(run_dirs, repo):
    res = {"run_dirs": run_dirs, "timeout": default_timeout(repo), "missing": {}}
    for d in run_dirs:
        if "cost" not in res:
            rows = cost_rows(d) if os.path.isdir(d) else {}
            if rows:
                res["cost"] = {"from": d, "rows": rows}
                res["receivercost"] = read_json(os.path.join(d, "receivercost.json"))
                res["run"] = read_json(os.path.join(d, "run.json"))
        if "wall" not in res:
            rows = wall_rows(d) if os.path.isdir(d) else {}
            if rows:
                res["wall"] = {"from": d, "rows": rows}
                res.setdefault("run", read_json(os.path.join(d, "run.json")))
        for key, tag, _ in TRUTH_SETS:
            if key in res:
                continue
            t, missing = truths(d, tag) if os.path.isdir(d) else (None, ["the folder"])
            if t:
                res[key] = dict(t, **{"from": d})
                res.setdefault("run", read_json(os.path.join(d, "run.json")))
            elif not tag:
                res["missing"][d] = missing
        if "machine" not in res and os.path.exists(os.path.join(d, "machine.txt")):
            res["machine"] = read_text(os.path.join(d, "machine.txt")).splitlines()[:12]
    if "cost" in res or "wall" in res:
        # One row per count: the cost run's figures and the wall run's.
        rows = {}
        for part in ("cost", "wall"):
            for n, r in res.get(part, {}).get("rows", {}).items():
                rows.setdefault(n, {"n": n}).update({k: v for k, v in r.items() if k != "n"})
        res["rows"] = rows
        ok = {n: r for n, r in rows.items() if r.get("cpu_ms_per_s") is not None}
        walled = {n: r for n, r in rows.items() if r.get("wall_ms_p99") is not None}
        res["linearity"] = {
            "collector_cpu": linearity({n: r["cpu_ms_per_s"] for n, r in ok.items()}),
            "scrape_wall_p50": linearity({n: r["wall_ms_p50"] for n, r in walled.items() if r.get("wall_ms_p50")}),
            "nvidia_smi_cpu": linearity({n: r["smi_cpu_ms_p50"] for n, r in rows.items() if r.get("smi_cpu_ms_p50")}),
            "rss": linearity({n: r["rss_mib_max"] for n, r in ok.items()}),
        }
        res["scrape_vs_timeout"] = scrape_vs_timeout(walled, res["timeout"])
    return res


def scrape_vs_timeout(rows, timeout):
    out = {"rows": {}}
    eff = timeout.get("effective_s")
    for n, r in sorted(rows.items()):
        p99 = r.get("wall_ms_p99")
        out["rows"][n] = {"p99_ms": p99,
                          "of_default_timeout": p99 / 1000 / eff if p99 is not None and eff else None,
                          "of_1s_interval": p99 / 1000 if p99 is not None else None}
    if rows:
        top = max(rows)
        p99 = rows[top].get("wall_ms_p99")
        out["max_n"] = top
        if p99 is not None and eff:
            out["exceeds_quarter_of_default"] = p99 / 1000 > eff / 4
            if top < 8:
                # The GPUs are read one after the other (the lane): the wall
                # time grows with the GPUs read.
                out["p99_8_extrapolated_ms"] = p99 * 8 / top
                out["exceeds_quarter_extrapolated"] = p99 * 8 / top / 1000 > eff / 4
    return out


def render(res):
    L = []
    say = L.append
    run = res.get("run") or {}
    say("# The cost and the truth on %s GPU(s) (issue 19)" % run.get("gpus", "?"))
    say("")
    for line in res.get("machine", [])[:6]:
        say("    " + line)
    say("")
    first, second = ("one spinning block", "the 50 %-duty matmul") if run.get("load_order") == "spin-first" else (
        "the 50 %-duty matmul", "one spinning block")
    say("Load: on even GPU indices %s, on odd ones %s (LOAD_ORDER %s); on every GPU %s more processes holding %s MiB "
        "each." % (first, second, run.get("load_order", "?"), run.get("holders", "?"), run.get("hold_mib", "?")))
    say("")
    to = res["timeout"]
    if "rows" in res:
        rows = res["rows"]
        say("## Cost against the number of GPUs (nvml at 1 s, `devices:` the first N, -> debug)")
        say("")
        say("| GPUs | collector CPU ms/s | per GPU | CPU in each second p50 / p99 | RSS MiB end / max | "
            "scrape wall ms p50 / p99 (spans) | wall p50 per GPU | CPU ms/s with the traces on | "
            "nvidia-smi -i, 15 fields: CPU / wall ms | nvidia-smi CPU per GPU |")
        say("|---|---|---|---|---|---|---|---|---|---|")
        for n in sorted(rows):
            r = rows[n]
            cpu = r.get("cpu_ms_per_s")
            if cpu is None:
                cells = ["no cost run%s" % (": " + r["error"] if r.get("error") else ""), "", "", ""]
            else:
                cells = [fmt(cpu, 2), fmt(cpu / n, 2), "%s / %s" % (fmt(r["cpu_ms_each_s_p50"], 2), fmt(r["cpu_ms_each_s_p99"], 2)),
                         "%s / %s" % (fmt(r["rss_mib_end"], 0), fmt(r["rss_mib_max"], 0))]
            if r.get("wall_ms_p99") is None:
                cells += ["no wall run%s" % (": " + r["wall_error"] if r.get("wall_error") else ""), "", ""]
            else:
                cells += ["%s / %s (%d scrapes)" % (fmt(r["wall_ms_p50"], 2), fmt(r["wall_ms_p99"], 2), r["scrapes"]),
                          fmt(r["wall_ms_p50"] / n, 2), fmt(r.get("cpu_ms_per_s_traced"), 2)]
            smi = r.get("smi_cpu_ms_p50")
            cells += ["%s / %s" % (fmt(smi, 1), fmt(r.get("smi_wall_ms_p50"), 1)), fmt(None if smi is None else smi / n, 1)]
            say("| %d | %s |" % (n, " | ".join(cells)))
        say("")
        lin = res["linearity"]
        for key, name in (("collector_cpu", "collector CPU per second"), ("scrape_wall_p50", "scrape wall p50"),
                          ("nvidia_smi_cpu", "nvidia-smi CPU per call"), ("rss", "RSS")):
            l = lin[key]
            fit = (" (fit: %s + %s per GPU, r² %s)" % (fmt(l["intercept"], 2), fmt(l["slope_per_gpu"], 2), fmt(l["r2"], 3))
                   if "slope_per_gpu" in l else "")
            say("- %s: %s%s" % (name, l["verdict"], fit))
        rc = res.get("receivercost")
        if rc and "wall_ms_p50" in rc:
            say("- receivercost.test (reads every GPU, %s; it takes no `devices:`): CPU p50 / p99 %s / %s ms, wall p50 / p99 "
                "%s / %s ms, all process CPU per scrape %s ms, %s scrapes at %s ms" % (
                    rc.get("gpus"), rc.get("cpu_ms_p50"), rc.get("cpu_ms_p99"), rc.get("wall_ms_p50"), rc.get("wall_ms_p99"),
                    fmt(rc.get("cpu_ms_per_scrape_all"), 2), rc.get("scrapes"), rc.get("interval_ms")))
        elif rc:
            say("- receivercost.test: no COST line (%s)" % str(rc.get("error", ""))[-200:].replace("\n", " "))
        diffs = [r["cpu_ms_per_s_traced"] - r["cpu_ms_per_s"] for r in rows.values()
                 if r.get("cpu_ms_per_s") is not None and r.get("cpu_ms_per_s_traced") is not None]
        if diffs:
            d = statistics.fmean(diffs)
            say("- The traces themselves (wall runs against cost runs): %s ms/s more CPU on average, %s this figure's "
                "run-to-run spread of about ±%.1f ms/s (docs/runs/h200-runs.md); the CPU figures above are without them" % (
                    fmt(d, 2), "within" if abs(d) <= RUN_SPREAD_MS else "BEYOND", RUN_SPREAD_MS))
        say("- Method: CPU from /proc/<pid>/stat over the window (as cost.py), each second's from the threads' "
            "schedstat, in runs without traces; the per-N scrape wall time from the collector's own scrape spans "
            "(%s) sent to a second collector, in separate runs with the traces on; receivercost.test builds its scraper from the default config without `devices:`, so it "
            "is reported only for every GPU at once." % SPAN_NAME)
        say("")
        say("## A scrape's p99 against the `timeout`")
        say("")
        if "error" in to:
            say("Default timeout unknown: %s" % to["error"])
        else:
            sv = res["scrape_vs_timeout"]
            say("Default `timeout`: %gs (%s), so a quarter is %g ms. This run's interval is 1 s (timeout 0 = 1 s, "
                "a quarter 250 ms)." % (to["effective_s"], to["source"], to["effective_s"] * 250))
            say("")
            say("| GPUs | scrape wall p99 ms | of the default timeout | of a 1 s timeout |")
            say("|---|---|---|---|")
            for n, r in sorted(sv["rows"].items()):
                say("| %d | %s | %s %% | %s %% |" % (n, fmt(r["p99_ms"], 2),
                                                   fmt(None if r["of_default_timeout"] is None else 100 * r["of_default_timeout"], 2),
                                                   fmt(None if r["of_1s_interval"] is None else 100 * r["of_1s_interval"], 1)))
            say("")
            if "exceeds_quarter_of_default" in sv:
                say("- %d GPUs: the p99 %s a quarter of the default timeout." % (
                    sv["max_n"], "EXCEEDS" if sv["exceeds_quarter_of_default"] else "is well inside"))
            if "p99_8_extrapolated_ms" in sv:
                say("- 8 GPUs, extrapolated (not measured: %d GPU(s) here, GPUs read one after the other): p99 ~%s ms, "
                    "%s a quarter of the default timeout." % (
                        sv["max_n"], fmt(sv["p99_8_extrapolated_ms"], 1),
                        "above" if sv["exceeds_quarter_extrapolated"] else "inside"))
        say("")
        say("## RSS")
        say("")
        for n in sorted(rows):
            r = rows[n]
            if r.get("rss_mib_max") is not None:
                say("- %d GPU(s): %s MiB at the end, %s at most (anonymous %s KiB, file-backed %s KiB)" % (
                    n, fmt(r["rss_mib_end"], 0), fmt(r["rss_mib_max"], 0), r.get("rss_anon_kib"), r.get("rss_file_kib")))
        say("")
    else:
        say("## Cost: not in these runs (PART=cost, PART=wall)")
        say("")
    kinds = set()
    for key, tag, title in TRUTH_SETS:
        if key not in res:
            if not tag:
                say("## Truths: not in these runs (PART=truth); missing: %s" % json.dumps(res["missing"]))
                say("")
            continue
        t = res[key]
        say("## %s%s (every GPU at once, nvml at 1 s, its defaults; %.0f s measured)" % (
            title[0].upper(), title[1:], t["window_s"]))
        say("")
        say("| GPU | load | check | result | figures |")
        say("|---|---|---|---|---|")
        for i, g in sorted(t["gpus"].items()):
            kinds.add(g["load"])
            for c in g["checks"]:
                say("| %d | %s | %s | %s | %s |" % (i, g["load"], c["check"],
                                                   "info" if c.get("info") else "PASS" if c["ok"] else "FAIL",
                                                   c["detail"].replace("|", "/")))
        failed = [(i, c["check"]) for i, g in t["gpus"].items() for c in g["checks"] if not c["ok"] and not c.get("info")]
        total = sum(1 for g in t["gpus"].values() for c in g["checks"] if not c.get("info"))
        say("")
        say("Truths%s: %s (%d of %d checks failed)" % (" (swapped loads)" if tag else "", "PASS" if not failed else "FAIL",
                                                        len(failed), total))
        say("")
    if kinds and "spin" not in kinds:
        say("No GPU ran the spinning block, so its truths (utilization ~1.0, SM activity < 0.02) were not "
            "checked: TRUTH_SWAP=1 or LOAD_ORDER=spin-first.")
    if kinds and "matmul" not in kinds:
        say("No GPU ran the 50 %-duty matmul, so its truths were not checked: TRUTH_SWAP=1.")
    return "\n".join(L) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", help="where scale.md and scale.json go (default: the first RUN_DIR)")
    ap.add_argument("--repo", default=os.path.dirname(os.path.dirname(HERE)), help="the repository (for the defaults)")
    ap.add_argument("run_dirs", nargs="+")
    a = ap.parse_args(argv)
    res = analyse(a.run_dirs, a.repo)
    out = a.out or a.run_dirs[0]
    os.makedirs(out, exist_ok=True)
    md = render(res)
    with open(os.path.join(out, "scale.md"), "w") as f:
        f.write(md)
    with open(os.path.join(out, "scale.json"), "w") as f:
        json.dump(res, f, indent=1, default=str)
    sys.stdout.write(md)
    if "rows" not in res and "truth" not in res:
        return 2
    return 1 if truth_failures(res) else 0


if __name__ == "__main__":
    sys.exit(main())
