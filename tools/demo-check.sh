#!/usr/bin/env bash
# The new user's check of `make demo` (issue 23, part 4): the demo as make
# runs it (simulated NVML and kubelet, testdata/collector/demo.yaml, nothing
# changed), and a real Prometheus scraping its endpoint every 15 s with the
# shipped rules (deploy/prometheus/rules.yaml), for DURATION (15m). Then it
# asks Prometheus:
#   - every sample of hw_status{hw_state="degraded"}: none may be 1;
#   - each holder's diagnosis code over the run: the sequence, and how often
#     it changed (a flap is a change back to an earlier state);
#   - the collector's log: warnings that a read was still running.
# Writes demo-check.md under OUT (default _build/demo-check) and exits 1
# when a GPU was reported degraded or a holder's diagnosis flapped.
# Run from the repository root: `make demo-check` (it builds what it needs).
set -euo pipefail
DURATION=${DURATION:-15m}
OUT=${OUT:-_build/demo-check}
PROMETHEUS=${PROMETHEUS:-/usr/bin/prometheus}
PORT=${PORT:-19099}
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

cat >"$work/prometheus.yml" <<EOF
global:
  scrape_interval: 15s
  evaluation_interval: 15s
rule_files:
  - $PWD/deploy/prometheus/rules.yaml
scrape_configs:
  - job_name: demo
    static_configs:
      - targets: ["127.0.0.1:8889"]
EOF

# make demo in a process group of its own, so that the collector and the
# simulated kubelet it starts stop with it.
setsid make --no-print-directory demo >"$OUT/collector.log" 2>&1 &
pids+=($!)
"$PROMETHEUS" --config.file="$work/prometheus.yml" --storage.tsdb.path="$work/tsdb" \
	--web.listen-address="127.0.0.1:$PORT" >"$work/prometheus.log" 2>&1 &
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
stillrunning=$(grep -c 'still running' "$OUT/collector.log" || true)

python3 - "$work" "$OUT/demo-check.md" "$DURATION" "$stillrunning" <<'PY'
import json, sys
work, report, duration, stillrunning = sys.argv[1:5]
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
lines += ["", f"Warnings that a read was still running: {stillrunning}", ""]
ok = ok and stillrunning == "0"
lines.append("| holder | codes at 15 s steps | changes | flaps |")
lines.append("|---|---|---|---|")
codes = result("codes")
for r in codes:
    m = r["metric"]
    holder = m.get("k8s_pod_name") or m.get("container_id", "")[:12] or m.get("hw_id", "?")
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
lines += ["", "PASS" if ok else "FAIL"]
open(report, "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
sys.exit(0 if ok else 1)
PY
