"""The checks of alert-run.sh, run while its Prometheus and Alertmanager are
still up: the input-bound container's notification (what the webhook
received), the diagnosis Prometheus recorded for it, and
otelcol-nvml-report's figures for it, against the run's own truth: the
workload's window on the GPU (truth.json) and nvidia-smi's utilization.gpu
every second (smi-util.txt). Prints PASS/FAIL lines and what it read; exit
status 0 when every check passed. Standard library only.

    python3 alert-compare.py --run DIR --prometheus URL --alertmanager URL
"""
import argparse
import json
import os
import re
import sys
import urllib.parse
import urllib.request

p = argparse.ArgumentParser()
p.add_argument("--run", required=True)
p.add_argument("--prometheus", required=True)
p.add_argument("--alertmanager", required=True)
a = p.parse_args()

truth = json.load(open(os.path.join(a.run, "truth.json")))
CID = truth["container_id"]
UUID = truth["gpu_uuid"]
start, end = truth["workload_start_ns"] / 1e9, truth["workload_end_ns"] / 1e9
window = end - start
# The receiver's idle bound (accounting::idle_threshold, the rules'
# waste.idleActivity): activity under it is idle.
IDLE_BOUND = 0.05

results = []


def check(name, ok, detail=""):
    results.append(ok)
    print(f"{'PASS' if ok else 'FAIL'} {name}" + (f": {detail}" if detail else ""))


def info(text):
    print(f"     {text}")


def get(url, **params):
    if params:
        url += "?" + urllib.parse.urlencode(params)
    with urllib.request.urlopen(url, timeout=30) as r:
        return json.load(r)


def prom(path, **params):
    try:
        body = get(a.prometheus + path, **params)
    except Exception as e:  # a figure we cannot read is a failed check, not a crash
        return None, str(e)
    return body.get("data"), None


def hms(t):
    return f"+{t - start:.0f} s" if t >= start else f"{t - start:.0f} s"


# ---- the truth ----
smi = []
with open(os.path.join(a.run, "smi-util.txt")) as f:
    for line in f:
        parts = line.split()
        if len(parts) == 2 and re.fullmatch(r"[0-9.]+", parts[1]):
            t, u = float(parts[0]), float(parts[1]) / 100
            if start <= t <= end:
                smi.append(u)
cpu_truth = (truth["cpu_usec_end"] - truth["cpu_usec_start"]) / 1e6 / window / truth["cpus"]
busy_truth = sum(smi) / len(smi) if smi else None
idle_share = sum(1 for u in smi if u < IDLE_BOUND) / len(smi) if smi else None
print(f"run: {'SIMULATED NVML (FAKE=1)' if truth['fake'] else 'real GPU'}, GPU {truth['gpu_index']} {UUID}, "
      f"container {CID[:12]} ({truth['cpus']} CPUs)")
print(f"truth: the workload held the GPU {window:.1f} s; nvidia-smi utilization.gpu mean "
      f"{busy_truth if busy_truth is None else round(busy_truth, 3)} over {len(smi)} samples, "
      f"{idle_share if idle_share is None else round(idle_share, 3)} of them under {IDLE_BOUND}; "
      f"the container's CPU (cpu.stat) {cpu_truth:.3f} of its limit")
print()

# ---- the notifications ----
print("== notifications (webhook) ==")
notes = []
path = os.path.join(a.run, "notifications.jsonl")
if os.path.exists(path):
    with open(path) as f:
        notes = [json.loads(line) for line in f if line.strip()]
alerts = []  # (received, receiver, alert)
for n in notes:
    receiver = n["path"].strip("/")
    for al in n["body"].get("alerts", []):
        alerts.append((n["received"], receiver, al))
        lb = al.get("labels", {})
        info(f"{hms(n['received'])} {receiver}: {al.get('status')} {lb.get('alertname')} "
             + " ".join(f"{k}={v}" for k, v in sorted(lb.items()) if k != "alertname"))
if not alerts:
    info("none")


def is_ours(al):
    return al["labels"].get("container_id") == CID


firing = [(t, r, al) for t, r, al in alerts
          if al["labels"].get("alertname") == "GPUHolderInputBound" and al.get("status") == "firing" and is_ours(al)]
check("GPUHolderInputBound notified for the container", bool(firing),
      f"first {hms(firing[0][0])} after the workload reached the GPU, to receiver {firing[0][1]}" if firing
      else f"{len(alerts)} alerts in {len(notes)} notifications, none GPUHolderInputBound firing with container_id={CID[:12]}…")
if firing:
    al = firing[0][2]
    lb, an = al["labels"], al.get("annotations", {})
    print()
    for k in sorted(an):
        info(f"{k}: {an[k]}")
    print()
    check("labels: state input_bound, the GPU, severity warning",
          lb.get("state") == "input_bound" and lb.get("hw_id") == UUID and lb.get("severity") == "warning",
          f"state={lb.get('state')} hw_id={lb.get('hw_id')} severity={lb.get('severity')} holder_kind={lb.get('holder_kind')}")
    check("routing label container_id", lb.get("container_id") == CID, lb.get("container_id", "missing"))
    text = an.get("summary", "") + " " + an.get("description", "")
    check("the summary or description names the container", CID[:12] in text, an.get("summary", "no summary"))
    host = truth.get("host", "")
    check("the text names the host (no Kubernetes node)", bool(host) and host in text, f"host {host}")
    # The figures: the GPU's activity and the container's CPU of its limit,
    # against nvidia-smi's utilization (SM activity is at most that) and the
    # cgroup's own counter.
    desc = an.get("description", "")
    m = re.search(r"activity ([0-9.]+)%", desc)
    act = float(m.group(1)) / 100 if m else None
    check("the description's activity is at most nvidia-smi's utilization", act is not None and busy_truth is not None
          and act <= busy_truth + 0.05, f"{act} against {busy_truth if busy_truth is None else round(busy_truth, 4)}")
    m = re.search(r"([0-9.]+)% of its CPU limit", desc)
    cpu = float(m.group(1)) / 100 if m else None
    check("the description's CPU of the limit = the cgroup's", cpu is not None and abs(cpu - cpu_truth) <= 0.1,
          f"{cpu} against {cpu_truth:.3f}")
    adv = an.get("advice", "")
    words = [w for w in ("num_workers", "pin_memory", "persistent_workers") if w in adv]
    check("the advice names num_workers, pin_memory, persistent_workers", len(words) == 3, f"has {words}")
    check("runbook_url to #input_bound", an.get("runbook_url", "").endswith("#input_bound"), an.get("runbook_url", "missing"))
others = sorted({al["labels"]["alertname"] for _, _, al in alerts
                 if al["labels"].get("alertname", "").startswith("GPUHolder") and is_ours(al)
                 and al["labels"]["alertname"] != "GPUHolderInputBound"})
check("no other holder alert notified for the container", not others, ", ".join(others) or "none")
resolved = [t for t, _, al in alerts
            if al["labels"].get("alertname") == "GPUHolderInputBound" and al.get("status") == "resolved" and is_ours(al)]
info(f"resolved notification: {hms(resolved[0]) if resolved else 'none yet (the shipped group_interval may be past the run)'}")
print()

# ---- the diagnosis, as Prometheus recorded it ----
print("== the diagnosis (Prometheus) ==")
data, err = prom("/api/v1/query_range", query=f'gpu_holder:nvidia_gpu_diagnosis:5m{{container_id="{CID}"}} == 1',
                 start=start, end=end, step=5)
states = []  # (t, state)
for s in (data or {}).get("result", []):
    for t, _ in s["values"]:
        states.append((float(t), s["metric"].get("state")))
states.sort()
runs = []
for t, st in states:
    if runs and runs[-1][0] == st:
        runs[-1][2] = t
    else:
        runs.append([st, t, t])
info("states: " + (", ".join(f"{st} {hms(t0)}..{hms(t1)}" for st, t0, t1 in runs) or f"none ({err})"))
late = [st for t, st in states if t >= start + 60]
share = late.count("input_bound") / len(late) if late else 0
check("input_bound from the first minute on", share >= 0.9, f"{share:.0%} of {len(late)} evaluations")
for name in ("gpu_holder:nvidia_gpu_activity:5m", "gpu_holder:nvidia_gpu_cpu_of_limit:5m", "gpu_holder:nvidia_gpu_held:5m"):
    d, err = prom("/api/v1/query", query=f'{name}{{container_id="{CID}"}}', time=end - 3)
    v = [float(s["value"][1]) for s in (d or {}).get("result", [])]
    info(f"{name} at the workload's end: {v[0] if v else err or 'none'}")
# What Prometheus renders for the alert now (the notification keeps its
# first rendering).
try:
    for al in get(a.prometheus + "/api/v1/alerts")["data"]["alerts"]:
        if al["labels"].get("container_id") == CID:
            info(f"Prometheus now: {al['labels'].get('alertname')} {al['state']}: {al['annotations'].get('description', '')}")
except Exception as e:
    info(f"Prometheus /api/v1/alerts: {e}")
d, _ = prom("/api/v1/query_range", query='ALERTS{alertname=~"GPUHolder.+", alertstate="firing"}',
            start=start, end=truth["finish_ns"] / 1e9, step=5)
for s in (d or {}).get("result", []):
    m = s["metric"]
    info(f"ALERTS firing {m.get('alertname')} {m.get('hw_id')} {m.get('container_id', '')[:12]}: "
         f"{hms(float(s['values'][0][0]))}..{hms(float(s['values'][-1][0]))}")
print()

# ---- the report ----
print("== otelcol-nvml-report ==")
rj = os.path.join(a.run, "report.json")
if not os.path.exists(rj):
    info("SKIPPED: no otelcol-nvml-report in the bundle")
else:
    tbl = os.path.join(a.run, "report.table")
    if os.path.exists(tbl):
        with open(tbl) as f:
            for line in f.read().splitlines():
                info(line)
    try:
        rep = json.load(open(rj))
    except ValueError as e:
        rep = None
        check("the report's JSON parses", False, f"{e}: {open(os.path.join(a.run, 'report-json.err')).read()[:300]}")
    if rep is not None:
        # The container's holder is its processes' owner (--by user).
        d, _ = prom("/api/v1/query", query=f'group by (process_owner) (last_over_time(nvidia_gpu_process_held_time_seconds_total{{container_id="{CID}"}}[1h]))',
                    time=truth["finish_ns"] / 1e9)
        owners = [s["metric"].get("process_owner", "") for s in (d or {}).get("result", [])]
        rows = rep.get("rows", []) if isinstance(rep, dict) else []
        mine = [r for r in rows if r.get("holder", {}).get("user") in owners]
        check("the report has a row for the container's owner", len(mine) == 1,
              f"owner {owners}; {len(mine)} of {len(rows)} rows: {json.dumps(mine or rows)[:300]}")
        if len(mine) == 1:
            r = mine[0]

            def secs(key):
                # GPU-hours in the report; seconds here.
                v = r.get(key)
                return None if v is None else float(v) * 3600

            held, busy, active, idle = (secs(k) for k in ("held_gpu_hours", "busy_gpu_hours", "active_gpu_hours", "idle_gpu_hours"))
            tol = max(10, 0.05 * window)
            # Time the collector could not observe (a late read, past 2.5
            # collection intervals, is a gap): held leaves it out.
            d, _ = prom("/api/v1/query", query=f'sum by (nvidia_gpu_unobserved_reason) (increase('
                        f'nvidia_gpu_unobserved_time_seconds_total{{hw_id="{UUID}"}}[{int(truth["finish_ns"] / 1e9 - start) + 60}s]))',
                        time=truth["finish_ns"] / 1e9)
            unobserved = {s["metric"].get("nvidia_gpu_unobserved_reason", ""): round(float(s["value"][1]), 1)
                          for s in (d or {}).get("result", []) if float(s["value"][1]) > 0}
            check("held = the workload's time on the GPU", held is not None and abs(held - window) <= tol,
                  f"{held if held is None else round(held, 1)} s against {window:.1f} s (±{tol:.0f} s); "
                  f"unobserved by the collector: {unobserved or 'none'}")
            if held and busy_truth is not None:
                check("busy = held x nvidia-smi's mean utilization", busy is not None and abs(busy - busy_truth * held) <= 0.05 * held + 5,
                      f"{busy if busy is None else round(busy, 1)} s against {busy_truth * held:.1f} s")
                check("active small, at most busy", active is not None and active <= 0.1 * held and active <= busy + 5,
                      f"{active if active is None else round(active, 1)} s of {held:.1f} s held")
                check("idle = held x the share of samples under the idle bound, or more",
                      idle is not None and idle_share * held - 0.1 * held <= idle <= held + 5,
                      f"{idle if idle is None else round(idle, 1)} s; at least {idle_share * held:.1f} s")
            # The cost: held GPU-hours at the rules' price of the GPU's model.
            d, _ = prom("/api/v1/query", query=f'nvidia_gpu_price_per_hour * on (hw_model) group_left '
                        f'group by (hw_model) (last_over_time(hw_gpu_memory_limit_bytes{{hw_id="{UUID}"}}[1h]))',
                        time=truth["finish_ns"] / 1e9)
            price = [float(s["value"][1]) for s in (d or {}).get("result", [])]
            cost = r.get("cost")
            if price:
                check("cost = held GPU-hours x the model's price", cost is not None and held is not None
                      and abs(cost - held / 3600 * price[0]) <= 0.01 * max(cost, 0.01),
                      f"{cost} against {held / 3600 * price[0] if held else None} at {price[0]} a GPU-hour")
            else:
                # A model the values do not list gets the default price from
                # the 24h figures, which a run of minutes may not have yet.
                info(f"cost {cost}: the rules have no price for this GPU's model yet (not a listed model)")
            st = r.get("state")
            check("the report's state is input_bound", st == "input_bound", str(st))
            check("the report's advice names num_workers", "num_workers" in str(r.get("advice", "")), str(r.get("advice", ""))[:120])

print()
n = len(results)
print(f"{sum(results)} of {n} checks PASS" + ("" if all(results) else " — FAILED"))
sys.exit(0 if results and all(results) else 1)
