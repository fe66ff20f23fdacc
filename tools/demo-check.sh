#!/usr/bin/env bash
# The new user's check of `make demo` (issues 23 and 26): the demo as make
# runs it (tools/demo.sh: simulated NVML and kubelet, moving CPU counters,
# testdata/collector/demo.yaml, and its Prometheus with the shipped rules,
# scraping every 15 s, here on PORT), for DURATION (15m). Then it asks that
# Prometheus:
#   - every sample of hw_status{hw_state="degraded"}: none may be 1;
#   - each holder's diagnosis code over the run: the sequence, and how often
#     it changed (a flap is a change back to an earlier state), and its last
#     code against the state the demo plays for it (testdata/demo/README.md):
#     all five states must be there;
#   - the holders of issue 24: the DRA claim's pod, the Slurm job, the GPU
#     quota row;
#   - the README's three queries: each must return data;
#   - the collector's log: warnings that a read was still running, the one
#     line with the endpoints, and how many lines a minute it prints after
#     the first minute (at most 30: the debug exporter at basic).
#   - where the demo started Alertmanager (Debian's prometheus-alertmanager
#     installed), the notifications it printed: the input_bound, idle and
#     memory_pressure pods' each to its team, GPULost to the platform, and
#     none for the gpu_bound pod.
# Writes demo-check.md under OUT (default _build/demo-check) and exits 1
# when any of these fails.
# Run from the repository root: `make demo-check` (it builds what it needs).
set -euo pipefail
DURATION=${DURATION:-15m}
OUT=${OUT:-_build/demo-check}
PROMETHEUS=${PROMETHEUS:-/usr/bin/prometheus}
PORT=${PORT:-19099}
test -x "$PROMETHEUS" || { echo "demo-check needs Prometheus at $PROMETHEUS: apt-get install prometheus, or set PROMETHEUS="; exit 1; }
export PROMETHEUS
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
work=$(mktemp -d)

pids=() # everything started here, stopped by PID on the way out
# shellcheck disable=SC2317 # called by the trap
cleanup() {
	local p
	for p in "${pids[@]}"; do kill -- "-$p" 2>/dev/null || kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT

seconds() { # 15m, 90s, 1h -> seconds
	local d=$1
	case $d in
	*h) echo $((${d%h} * 3600)) ;;
	*m) echo $((${d%m} * 60)) ;;
	*s) echo "${d%s}" ;;
	*) echo "$d" ;;
	esac
}

# make demo in a process group of its own, so that everything it starts
# stops with it.
DEMO_PROMETHEUS_PORT=$PORT setsid make --no-print-directory demo >"$OUT/collector.log" 2>&1 &
pids+=($!)

start=$(date +%s)
sleep "$(seconds "$DURATION")"
end=$(date +%s)
range="$((end - start))s"

query() { # query PROMQL: the JSON answer, evaluated at the end of the run
	curl -sfG "http://127.0.0.1:$PORT/api/v1/query" --data-urlencode "query=$1" --data-urlencode "time=$end"
}
query_range() { # query_range PROMQL: 15 s steps over the run
	curl -sfG "http://127.0.0.1:$PORT/api/v1/query_range" --data-urlencode "query=$1" \
		--data-urlencode "start=$start" --data-urlencode "end=$end" --data-urlencode "step=15"
}

query "count_over_time((hw_status{hw_state=\"degraded\"} == 1)[$range:15s])" >"$work/degraded.json"
query "count_over_time(hw_status{hw_state=\"degraded\"}[$range])" >"$work/status-samples.json"
query_range 'gpu_holder:nvidia_gpu_diagnosis_code:5m' >"$work/codes.json"
query 'gpu_holder:nvidia_gpu_diagnosis_code:5m' >"$work/last.json"
query 'nvidia_gpu_allocation_ratio{k8s_resourceclaim_name!=""}' >"$work/dra.json"
query 'gpu_slurm_job:nvidia_gpu_held_hours:1h' >"$work/slurm.json"
query 'namespace:nvidia_gpu_quota_held:ratio' >"$work/quota.json"
# The README's three queries ("which pod wastes GPUs, and why").
query 'gpu_holder:nvidia_gpu_diagnosis:5m == 1' >"$work/readme1.json"
query 'namespace:nvidia_gpu_idle_hours:1h' >"$work/readme2.json"
query 'topk(5, namespace_pod:nvidia_gpu_idle_hours:1h)' >"$work/readme3.json"
grep '^demo: notification to ' "$OUT/collector.log" >"$work/notifications.txt" || true
alertmanager=$(grep -c 'Alertmanager with the shipped routes' "$OUT/collector.log" || true)
stillrunning=$(grep -c 'still running' "$OUT/collector.log" || true)
endpoints=$(grep -c '^demo: metrics http://127.0.0.1:8889/metrics' "$OUT/collector.log" || true)
# Log lines stamped after the first minute, per minute.
after=$(date -u -d "@$((start + 60))" +%Y-%m-%dT%H:%M:%S)
perminute=$(awk -v after="$after" '/^[0-9][0-9][0-9][0-9]-/ && substr($1, 1, 19) > after' "$OUT/collector.log" | wc -l)
perminute=$((perminute * 60 / (end - start - 60)))

python3 - "$work" "$OUT/demo-check.md" "$DURATION" "$stillrunning" "$endpoints" "$perminute" "$alertmanager" <<'PY'
import json, sys
work, report, duration, stillrunning, endpoints, perminute, alertmanager = sys.argv[1:8]
def result(name):
    return json.load(open(f"{work}/{name}.json"))["data"]["result"]
degraded = {r["metric"].get("hw_id", "?"): int(float(r["value"][1])) for r in result("degraded")}
samples = {r["metric"].get("hw_id", "?"): int(float(r["value"][1])) for r in result("status-samples")}
lines = [f"# make demo for {duration}: degraded GPUs and diagnosis codes", ""]
ok = True
lines.append("| GPU | hw_status samples | degraded samples |")
lines.append("|---|---|---|")
for gpu in sorted(samples):
    lines.append(f"| {gpu} | {samples[gpu]} | {degraded.get(gpu, 0)} |")
    ok = ok and degraded.get(gpu, 0) == 0
if not samples:
    lines.append("| (no hw_status series) | | |")
    ok = False
lines += ["", f"Warnings that a read was still running: {stillrunning}",
          f"The line with the endpoints: {endpoints}; log lines a minute after the first minute: {perminute}", ""]
ok = ok and stillrunning == "0" and endpoints == "1" and int(perminute) <= 30
lines.append("| holder | codes at 15 s steps | changes | flaps |")
lines.append("|---|---|---|---|")
codes = result("codes")
for r in codes:
    m = r["metric"]
    holder = m.get("k8s_pod_name") or m.get("container_id", "")[:12] or "slurm job on"
    seq = [str(int(float(v))) for _, v in r["values"]]
    changes = sum(1 for a, b in zip(seq, seq[1:]) if a != b)
    # A flap: the state returns to one it had left.
    runs = [c for i, c in enumerate(seq) if i == 0 or c != seq[i - 1]]
    flaps = len(runs) - len(set(runs))
    ok = ok and flaps == 0
    lines.append(f"| {holder} {m.get('hw_id', '')[:12]} | {''.join(seq)} | {changes} | {flaps} |")
if not codes:
    lines.append("| (no diagnosis series) | | | |")
    ok = False

# The state the demo plays for each holder (testdata/demo/README.md), by
# pod, by container id, or by GPU for the Slurm job (no container).
names = {1: "memory_pressure", 2: "idle", 3: "input_bound", 4: "gpu_bound", 5: "underused"}
want = {"llm-finetune-0": 1, "notebook-alice": 2, "yolo-train-0": 3, "resnet-train-0": 4,
        "b7e2b7e2b7e2": 5, "slurm job on GPU-5151a7ed-de30-4000-8000-000000000001": 5}
last = {}
for r in result("last"):
    m = r["metric"]
    holder = m.get("k8s_pod_name") or m.get("container_id", "")[:12] or "slurm job on " + m.get("hw_id", "?")
    last[holder] = int(float(r["value"][1]))
lines += ["", "| holder | state at the end | the demo plays |", "|---|---|---|"]
for holder in sorted(set(want) | set(last)):
    got, w = last.get(holder), want.get(holder)
    lines.append(f"| {holder} | {names.get(got, got)} | {names.get(w, w)} |")
    ok = ok and got == w
missing = sorted(set(names.values()) - {names.get(c) for c in last.values()})
lines.append("")
lines.append(f"States not reached: {', '.join(missing) or 'none'}")
ok = ok and not missing

def labels(name, *keys):
    return sorted({"/".join(r["metric"].get(k, "") for k in keys) for r in result(name)})
checks = [
    ("DRA claim's holder (nvidia_gpu_allocation_ratio with k8s_resourceclaim_name)",
     labels("dra", "k8s_namespace_name", "k8s_pod_name", "k8s_resourceclaim_name")),
    ("Slurm job (gpu_slurm_job:nvidia_gpu_held_hours:1h)", labels("slurm", "slurm_job_id", "process_owner")),
    ("GPU quota row (namespace:nvidia_gpu_quota_held:ratio)",
     [f"{r['metric'].get('k8s_namespace_name')} {float(r['value'][1]):.2f}" for r in result("quota")]),
    ("README query 1: each holder's state", labels("readme1", "k8s_pod_name", "state")),
    ("README query 2: idle GPU-hours per namespace",
     [f"{r['metric'].get('k8s_namespace_name')} {float(r['value'][1]):.3f}" for r in result("readme2")]),
    ("README query 3: the top pods by idle hours",
     [f"{r['metric'].get('k8s_namespace_name')}/{r['metric'].get('k8s_pod_name')} {float(r['value'][1]):.3f}" for r in result("readme3")]),
]
lines += ["", "| check | answer |", "|---|---|"]
for what, answer in checks:
    lines.append(f"| {what} | {'; '.join(answer) or 'NONE'} |")
    ok = ok and bool(answer)
# The notifications the demo's Alertmanager sent (tools/demowebhook's
# lines), by receiver, alert and holder.
if alertmanager != "0":
    sent = [l.strip() for l in open(f"{work}/notifications.txt")]
    lines += ["", "| notification expected | sent |", "|---|---|"]
    for want in ["team-vision: FIRING GPUHolderInputBound, pod vision/yolo-train-0",
                 "team-ml: FIRING GPUHolderIdle, pod research/notebook-alice",
                 "team-ml: FIRING GPUHolderMemoryPressure, pod ml-training/llm-finetune-0",
                 "gpu-platform: FIRING GPULost"]:
        got = any(want in l for l in sent)
        lines.append(f"| {want} | {'yes' if got else 'NO'} |")
        ok = ok and got
    gpu_bound = [l for l in sent if "resnet-train-0" in l]
    lines.append(f"| none for the gpu_bound pod ml-training/resnet-train-0 | {'; '.join(gpu_bound) or 'none'} |")
    ok = ok and not gpu_bound
    lines += ["", f"Notifications: {len(sent)}"]
else:
    lines += ["", "No Alertmanager in the demo (prometheus-alertmanager not installed): notifications not checked"]
lines += ["", "PASS" if ok else "FAIL"]
open(report, "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
sys.exit(0 if ok else 1)
PY
