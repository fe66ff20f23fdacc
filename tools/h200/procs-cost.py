#!/usr/bin/env python3
"""The summary of procs-run.sh (issue 34, part 3): per build and count of
processes on the GPU, the collector's CPU per second, and the slope: the
least-squares CPU of one more process per second, against the goal.

  procs-cost.py --dir RUN_DIR --goal 0.1 --builds before after --counts 1 8 32

reads RUN_DIR/cost-<build>-n<count>.json (scale-cost.py collector) and
writes RUN_DIR/procs.md and procs.json. Exit 1 when a build's slope is over
the goal, 2 when a reading is missing.
"""
import argparse
import json
import os
import statistics
import sys


def slope(xs, ys):
    """Least squares: (slope, intercept); None with fewer than two points."""
    if len(xs) < 2:
        return None
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    if sxx == 0:
        return None
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
    return b, my - b * mx


def summarize(run_dir, builds, counts, goal):
    rows, out, missing = [], {"goal_ms": goal, "builds": {}}, False
    for b in builds:
        xs, ys, ys_sched, ys_p50 = [], [], [], []
        per = {}
        for n in counts:
            path = os.path.join(run_dir, "cost-%s-n%d.json" % (b, n))
            try:
                with open(path) as f:
                    r = json.load(f)
            except (OSError, ValueError):
                r = {"error": "no reading"}
            if "error" in r or "cpu_ms_per_s" not in r:
                missing = True
                rows.append("| %s | %d | %s | | | |" % (b, n, r.get("error", "no reading")))
                continue
            each = r.get("cpu_ms_each_s") or []
            sched = statistics.fmean(each) if each else None
            p50 = statistics.median(each) if each else None
            per[n] = {"cpu_ms_per_s": r["cpu_ms_per_s"], "sched_ms_per_s": sched, "p50": p50,
                      "rss_mib": r.get("rss_mib_max")}
            xs.append(n)
            ys.append(r["cpu_ms_per_s"])
            if sched is not None:
                ys_sched.append(sched)
                ys_p50.append(p50)
            rows.append("| %s | %d | %.2f | %s | %s | %s |" % (
                b, n, r["cpu_ms_per_s"], "%.2f" % sched if sched is not None else "",
                "%.2f" % p50 if p50 is not None else "", r.get("rss_mib_max", "")))
        fit = slope(xs, ys)
        fit_s = slope(xs, ys_sched) if len(ys_sched) == len(xs) else None
        # The median second leaves out the background reads (energy every
        # 10 s) and GC that land on a few seconds: steadier than the mean.
        fit_p = slope(xs, ys_p50) if len(ys_p50) == len(xs) else None
        out["builds"][b] = {"counts": per,
                            "slope_ms": fit[0] if fit else None, "intercept_ms": fit[1] if fit else None,
                            "slope_sched_ms": fit_s[0] if fit_s else None,
                            "slope_p50_ms": fit_p[0] if fit_p else None}
    md = ["| build | processes | CPU ms/s (/proc stat) | CPU ms/s (schedstat, mean) | p50 of each second | RSS MiB |",
          "|---|---|---|---|---|---|"] + rows + [""]
    over = False
    for b, r in out["builds"].items():
        s = r["slope_ms"]
        if s is None:
            md.append("- %s: no slope (fewer than two readings)" % b)
            continue
        verdict = "PASS" if s <= goal else "OVER"
        over = over or s > goal
        ss, sp = r["slope_sched_ms"], r["slope_p50_ms"]
        md.append("- %s: **%.3f ms per extra process per second** (schedstat mean: %s; median second: %s), at 0 processes %.2f ms/s: %s (goal %.2f)" % (
            b, s, "%.3f" % ss if ss is not None else "n/a", "%.3f" % sp if sp is not None else "n/a",
            r["intercept_ms"], verdict, goal))
    text = "\n".join(md) + "\n"
    with open(os.path.join(run_dir, "procs.md"), "w") as f:
        f.write(text)
    with open(os.path.join(run_dir, "procs.json"), "w") as f:
        json.dump(out, f, indent=1)
    return text, (2 if missing else 1 if over else 0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--goal", type=float, default=0.1)
    ap.add_argument("--builds", nargs="+", required=True)
    ap.add_argument("--counts", nargs="+", type=int, required=True)
    a = ap.parse_args()
    text, rc = summarize(a.dir, a.builds, a.counts, a.goal)
    sys.stdout.write(text)
    return rc


if __name__ == "__main__":
    sys.exit(main())
