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
# shellcheck source=tools/h200/run-lib.sh
. "$here/run-lib.sh"
prepare_run

machine_info
[ -n "$(gpu_pids)" ] && note "WARNING: GPU $GPU_INDEX already has processes; phase C cannot pass"
echo "# phase start_ns end_ns role=pid ... (waste-run.sh; GPU_INDEX=$GPU_INDEX)" >"$RUN_DIR/phases.txt"

start_collector

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

stop_collector

python3 "$here/waste-compare.py" "$RUN_DIR"
rc=$?
cp "$RUN_DIR/report.txt" "$OUT/waste-report.txt" 2>/dev/null
tar czf "$OUT/h200waste.tgz" -C "$(dirname "$RUN_DIR")" "$(basename "$RUN_DIR")"
exit "$rc"
