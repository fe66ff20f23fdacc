#!/usr/bin/env bash
# The waste-accounting run on a real GPU (issue 15): one otelcol-nvml run
# (.carry/otelcol-nvml from `make h200-bundle`, testdata/collector/h200-waste.yaml:
# nvml every 1 s, processes on, to $RUN_DIR/metrics.jsonl, nothing listening)
# while four phases of about $PHASE_SECONDS (25) each run one after the other
# on one GPU, $GPU_INDEX (the NVML index, default 0), whatever the number of
# GPUs:
#   A  a 50 %-duty bf16 matmul (workload.py --duty 0.5)
#   B  a process that allocates 4 GiB, synchronizes and sleeps
#   C  no process on the GPU
#   D  the matmul and one spinning 32-thread block (spin.py) sharing the GPU
# Each phase's start and end (unix ns) and its processes' PIDs go to
# phases.txt; a phase starts once its processes are on the GPU, and its
# processes stop 2 s after its end. waste-compare.py then checks the
# counters (report.txt). Leaves waste-report.txt and h200waste.tgz (every
# reading) under $OUT; exits with waste-compare.py's status.
# Changes no GPU setting. The GPU should have no other process on it.
set -u
: "${OUT:?set OUT to a folder for the results}"
GPU_INDEX=${GPU_INDEX:-0}
PHASE_SECONDS=${PHASE_SECONDS:-25}
CARRY=${CARRY:-.carry}
here=$(dirname "$0")
export GPU_INDEX RUN_DIR=${RUN_DIR:-/tmp/h200waste}
# CUDA numbers the GPUs as NVML (and nvidia-smi) do.
export CUDA_DEVICE_ORDER=PCI_BUS_ID PYTHONUNBUFFERED=1
rm -rf "$RUN_DIR" && mkdir -p "$RUN_DIR"
[ -e "$CARRY/otelcol-nvml.gz" ] && gunzip -f "$CARRY/otelcol-nvml.gz"
chmod +x "$CARRY/otelcol-nvml"

pids=() # everything started here, stopped on the way out
# shellcheck disable=SC2317 # called by the trap
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
	wait 2>/dev/null
}
trap cleanup EXIT

now() { date +%s%N; }
note() { echo "$(date -u +%T.%N | cut -c1-12) $*" | tee -a "$RUN_DIR/run.log"; }
# The PIDs with a compute context on the GPU.
gpu_pids() {
	nvidia-smi -i "$GPU_INDEX" --query-compute-apps=pid --format=csv,noheader 2>/dev/null | tr -d ' '
}
# wait_on_gpu PID...: until each is on the GPU (60 s at most).
wait_on_gpu() {
	local deadline=$((SECONDS + 60)) p missing
	while :; do
		missing=
		for p in "$@"; do
			if ! kill -0 "$p" 2>/dev/null; then
				note "WARNING: process $p exited before it was on GPU $GPU_INDEX"
				return 1
			fi
			gpu_pids | grep -qx "$p" || missing="$missing $p"
		done
		[ -z "$missing" ] && return 0
		if [ "$SECONDS" -ge "$deadline" ]; then
			note "WARNING: not on GPU $GPU_INDEX after 60 s:$missing"
			return 1
		fi
		sleep 0.5
	done
}
# wait_gpu_free: until no process is on the GPU (30 s at most).
wait_gpu_free() {
	local deadline=$((SECONDS + 30))
	while [ -n "$(gpu_pids)" ]; do
		if [ "$SECONDS" -ge "$deadline" ]; then
			note "WARNING: GPU $GPU_INDEX still has processes: $(gpu_pids | tr '\n' ' ')"
			return 1
		fi
		sleep 0.5
	done
}
# stop PID...: SIGTERM, then wait for each to be gone.
stop() {
	kill "$@" 2>/dev/null
	wait "$@" 2>/dev/null
}
# phase NAME ROLE=PID...: the phase's window, once its processes run.
phase() {
	local name=$1 start end
	shift
	start=$(now)
	note "phase $name started $*"
	sleep "$PHASE_SECONDS"
	end=$(now)
	echo "$name $start $end $*" >>"$RUN_DIR/phases.txt"
	note "phase $name ended"
	nvidia-smi -i "$GPU_INDEX" --query-compute-apps=pid,process_name,used_memory --format=csv >>"$RUN_DIR/processes.txt" 2>&1
}

{
	date -u +%FT%TZ
	nvidia-smi --query-gpu=index,name,uuid,driver_version,memory.used --format=csv
	echo "GPU_INDEX=$GPU_INDEX PHASE_SECONDS=$PHASE_SECONDS"
	echo "processes on GPU $GPU_INDEX before the run:"
	nvidia-smi -i "$GPU_INDEX" --query-compute-apps=pid,process_name,used_memory --format=csv
	python3 -c 'import torch, cupy; print("torch", torch.__version__, "cupy", cupy.__version__)'
} >"$RUN_DIR/machine.txt" 2>&1
[ -n "$(gpu_pids)" ] && note "WARNING: GPU $GPU_INDEX already has processes; phase C cannot pass"
echo "# phase start_ns end_ns role=pid ... (waste-run.sh; GPU_INDEX=$GPU_INDEX)" >"$RUN_DIR/phases.txt"

"$CARRY/otelcol-nvml" --config testdata/collector/h200-waste.yaml >"$RUN_DIR/collector.log" 2>&1 &
cpid=$!
pids+=("$cpid")
for _ in $(seq 1 30); do [ -s "$RUN_DIR/metrics.jsonl" ] && break; sleep 0.5; done
[ -s "$RUN_DIR/metrics.jsonl" ] || note "WARNING: no metrics after 15 s"
sleep 3
note "collector $cpid running"

# A: a 50 %-duty matmul, 4 GiB held.
python3 "$here/workload.py" --device "$GPU_INDEX" --gib 4 --duty 0.5 --seconds 600 >"$RUN_DIR/A-workload.log" 2>&1 &
wa=$!
pids+=("$wa")
wait_on_gpu "$wa"
sleep 2 # the 4 GiB, cuBLAS's start
phase A "workload=$wa"
sleep 2
stop "$wa"
wait_gpu_free

# B: allocate 4 GiB, synchronize, sleep.
python3 -c '
import sys, time, torch
dev = torch.device("cuda", int(sys.argv[1]))
hold = torch.empty(4 << 30, dtype=torch.uint8, device=dev)
torch.cuda.synchronize(dev)
print("holding", hold.numel(), "bytes", flush=True)
time.sleep(float(sys.argv[2]))
' "$GPU_INDEX" 600 >"$RUN_DIR/B-sleeper.log" 2>&1 &
sb=$!
pids+=("$sb")
wait_on_gpu "$sb"
for _ in $(seq 1 60); do grep -q holding "$RUN_DIR/B-sleeper.log" && break; sleep 0.5; done
sleep 1
phase B "sleeper=$sb"
sleep 2
stop "$sb"
wait_gpu_free

# C: nothing on the GPU. waste-compare.py leaves out the first 3 s, so the
# window starts 3 s after B's process is gone from the GPU.
phase C

# D: the matmul and the spinning block share the GPU.
python3 "$here/workload.py" --device "$GPU_INDEX" --gib 4 --duty 0.5 --seconds 600 >"$RUN_DIR/D-workload.log" 2>&1 &
wd=$!
python3 "$here/spin.py" --device "$GPU_INDEX" --seconds 600 >"$RUN_DIR/D-spin.log" 2>&1 &
sd=$!
pids+=("$wd" "$sd")
wait_on_gpu "$wd" "$sd"
sleep 3
phase D "workload=$wd" "spin=$sd"
sleep 2
stop "$wd" "$sd"
sleep 2

kill -TERM "$cpid"
for _ in $(seq 1 30); do kill -0 "$cpid" 2>/dev/null || break; sleep 0.5; done
kill -0 "$cpid" 2>/dev/null && note "WARNING: the collector did not stop in 15 s of SIGTERM; killed" && kill -KILL "$cpid"
wait "$cpid"
echo "collector exit: $?" >>"$RUN_DIR/collector.log"
grep -iE $'\t(warn|error)\t' "$RUN_DIR/collector.log" | head -20 >"$RUN_DIR/collector-warnings.txt"
note "collector stopped; $(wc -l <"$RUN_DIR/metrics.jsonl") lines; $(wc -l <"$RUN_DIR/collector-warnings.txt") warnings/errors in its log"

python3 "$here/waste-compare.py" "$RUN_DIR"
rc=$?
cp "$RUN_DIR/report.txt" "$OUT/waste-report.txt" 2>/dev/null
tar czf "$OUT/h200waste.tgz" -C "$(dirname "$RUN_DIR")" "$(basename "$RUN_DIR")"
exit "$rc"
