#!/usr/bin/env bash
# The cost of each GPU process (issue 34, part 3): the collector's CPU with
# 1, 8 and 32 processes on one GPU, for one build or several side by side on
# the same load, and the slope: the CPU of one more process per second.
#
#   OUT=/some/dir bash tools/h200/procs-run.sh [NAME=DIR ...]
#
# Each DIR holds otelcol-nvml (gzipped or not); default after=.carry (from
# `make h200-bundle`). Runs on the GPU machine from the repository root, as
# any user that can open /dev/nvidia*. Leaves procs.md, procs.json and
# h200procs.tgz (every reading) under $OUT; exits 1 when a build's slope is
# over $GOAL_MS (0.1 ms per process per second), 2 when a run failed.
#
# The load, on GPU $GPU_INDEX (0): a 50 %-duty bf16 matmul (workload.py) for
# the whole run, the first process; then processes that each hold $HOLD_MIB
# (256) MiB and sleep (scale-hold.py), added up to each count of $COUNTS
# ("1 8 32": processes on the GPU). At each count, each build in turn: the
# collector (nvml at 1 s, `devices: [GPU_INDEX]`, the rest of the receiver
# at its defaults, processes on -> debug, self-telemetry off; scale-cost.py
# collector) for $COST_SECONDS (40) after a $WARMUP (5) s warm-up: its CPU
# per second from /proc/<pid>/stat over the window, and each second's from
# its threads' schedstat. The builds alternate on the same load, so that
# their difference is theirs.
#
# Time: about 40 s to start the load, then (WARMUP + COST_SECONDS + 2) s per
# count and build: ~190 s for one build, ~330 s for two. PLAN_ONLY=1 prints
# the plan. Changes no GPU setting: it only reads, and runs CUDA processes.
set -u
: "${OUT:?set OUT to a folder for the results}"
T_START=$SECONDS
GPU_INDEX=${GPU_INDEX:-0}
COUNTS=${COUNTS:-1 8 32}
COST_SECONDS=${COST_SECONDS:-40}
WARMUP=${WARMUP:-5}
HOLD_MIB=${HOLD_MIB:-256}
GOAL_MS=${GOAL_MS:-0.1}
here=$(dirname "$0")
RUN_DIR=${RUN_DIR:-/tmp/h200procs}
export CUDA_DEVICE_ORDER=PCI_BUS_ID PYTHONUNBUFFERED=1

builds=("$@")
[ ${#builds[@]} -eq 0 ] && builds=("after=${CARRY:-.carry}")
read -r -a counts <<<"$COUNTS"
per=$((WARMUP + COST_SECONDS + 2))
mkdir -p "$OUT"
{
	echo "GPU $GPU_INDEX; processes: ${counts[*]}; builds: ${builds[*]}"
	echo "estimate: ~$((40 + ${#counts[@]} * ${#builds[@]} * per)) s (${per} s per count and build)"
} | tee "$OUT/plan.txt"
[ -n "${PLAN_ONLY:-}" ] && exit 0

rm -rf "$RUN_DIR" && mkdir -p "$RUN_DIR"
cp "$OUT/plan.txt" "$RUN_DIR/"
names=()
for b in "${builds[@]}"; do
	name=${b%%=*} dir=${b#*=}
	[ "$name" = "$b" ] && { echo "a build is NAME=DIR (got $b)" >&2; exit 2; }
	[ -e "$dir/otelcol-nvml.gz" ] && gunzip -kf "$dir/otelcol-nvml.gz"
	[ -x "$dir/otelcol-nvml" ] || chmod +x "$dir/otelcol-nvml" 2>/dev/null
	[ -x "$dir/otelcol-nvml" ] || { echo "no otelcol-nvml in $dir" >&2; exit 2; }
	names+=("$name")
	echo "$name $(readlink -f "$dir/otelcol-nvml")" >>"$RUN_DIR/builds.txt"
done

pids=()
# shellcheck disable=SC2317 # called by the trap
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
	wait 2>/dev/null
}
trap cleanup EXIT
note() { echo "$(date -u +%T) [$((SECONDS - T_START)) s] $*" | tee -a "$RUN_DIR/run.log"; }
{
	date -u +%FT%TZ
	nvidia-smi --query-gpu=index,name,uuid,driver_version,memory.total,memory.used --format=csv
	uname -r
	nproc
	echo "processes on the GPUs before the run:"
	nvidia-smi --query-compute-apps=gpu_uuid,pid,process_name,used_memory --format=csv
} >"$RUN_DIR/machine.txt" 2>&1

# on_gpu N: wait (120 s at most) until N processes of this run are on the GPU.
on_gpu() {
	local deadline=$((SECONDS + 120)) have
	while :; do
		have=$(nvidia-smi --query-compute-apps=pid --format=csv,noheader 2>/dev/null | tr -d ' ' | grep -cxF -f <(printf '%s\n' "${pids[@]}"))
		[ "$have" -ge "$1" ] && return 0
		[ "$SECONDS" -ge "$deadline" ] && { note "WARNING: $have of $1 processes on the GPU after 120 s"; return 1; }
		sleep 1
	done
}

python3 "$here/workload.py" --device "$GPU_INDEX" --gib 4 --duty 0.5 --seconds 1800 >"$RUN_DIR/matmul.log" 2>&1 &
pids+=($!)
rc=0
for n in "${counts[@]}"; do
	while [ ${#pids[@]} -lt "$n" ]; do
		python3 "$here/scale-hold.py" --device "$GPU_INDEX" --mib "$HOLD_MIB" --seconds 1800 >"$RUN_DIR/hold${#pids[@]}.log" 2>&1 &
		pids+=($!)
	done
	on_gpu "$n" || rc=2
	sleep 3 # the new contexts settle; the matmul's memory is in place
	nvidia-smi --query-compute-apps=gpu_uuid,pid,process_name,used_memory --format=csv >"$RUN_DIR/apps-n$n.csv" 2>&1
	note "n=$n: $(($(wc -l <"$RUN_DIR/apps-n$n.csv") - 1)) compute processes on the machine"
	for b in "${builds[@]}"; do
		name=${b%%=*} dir=${b#*=}
		note "n=$n $name: collector for $COST_SECONDS s"
		python3 "$here/scale-cost.py" collector --bin "$dir/otelcol-nvml" --devices "$GPU_INDEX" \
			--seconds "$COST_SECONDS" --warmup "$WARMUP" \
			--log "$RUN_DIR/collector-$name-n$n.log" --out "$RUN_DIR/cost-$name-n$n.json" >>"$RUN_DIR/run.log" 2>&1 ||
			{ note "WARNING: the $name collector failed at n=$n (collector-$name-n$n.log)"; rc=2; }
	done
done
cleanup
trap - EXIT
grep -hiE $'\t(warn|error)\t' "$RUN_DIR"/collector-*.log 2>/dev/null | head -40 >"$RUN_DIR/collector-warnings.txt"
python3 "$here/procs-cost.py" --dir "$RUN_DIR" --goal "$GOAL_MS" --builds "${names[@]}" --counts "${counts[@]}" | tee "$RUN_DIR/summary.txt"
src=${PIPESTATUS[0]}
[ "$rc" -eq 0 ] && rc=$src
cp "$RUN_DIR/procs.md" "$RUN_DIR/procs.json" "$OUT/" 2>/dev/null
tar czf "$OUT/h200procs.tgz" -C "$(dirname "$RUN_DIR")" "$(basename "$RUN_DIR")"
note "done in $((SECONDS - T_START)) s"
exit "$rc"
