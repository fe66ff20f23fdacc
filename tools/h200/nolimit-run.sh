#!/usr/bin/env bash
# The diagnosis without a CPU limit on a real GPU (issue 23, part 3): one
# otelcol-nvml run (.carry/otelcol-nvml from `make h200-bundle`,
# testdata/collector/h200-waste.yaml: nvml every 1 s, processes on, to
# $RUN_DIR/metrics.jsonl) while four phases of $PHASE_SECONDS (40) each run
# one after the other on one GPU, $GPU_INDEX (the NVML index, default 0),
# whatever the number of GPUs (nolimit.py):
#   loader   a num_workers=0 loader: ~50 ms of Python CPU work per step in
#            the GPU process, then one bf16 8192^2 matmul
#   batch50  back-to-back matmuls, 50 per torch.cuda.synchronize()
#   sync1    the same matmuls with a synchronize() after every one
#   sleep    a holder that holds 2 GiB and sleeps
# No process runs in a cgroup with a CPU limit, nothing needs root, and no
# GPU setting is changed. The GPU should have no other process on it. About
# 4 minutes of GPU time with the default PHASE_SECONDS.
#
# Each phase's start and end (unix ns) and its process's PID go to
# phases.txt. nolimit-compare.py --no-promtool then prints each phase's
# figures (report.txt); the states the shipped rules give need promtool,
# which the GPU machine lacks: untar nolimit.tgz where promtool is and run
# nolimit-compare.py on the folder. Leaves nolimit-report.txt and
# nolimit.tgz (every reading) under $OUT.
set -u
: "${OUT:?set OUT to a folder for the results}"
GPU_INDEX=${GPU_INDEX:-0}
PHASE_SECONDS=${PHASE_SECONDS:-40}
CARRY=${CARRY:-.carry}
here=$(dirname "$0")
export GPU_INDEX RUN_DIR=${RUN_DIR:-/tmp/h200nolimit}
# shellcheck source=tools/h200/run-lib.sh
. "$here/run-lib.sh"
prepare_run

machine_info
[ -n "$(gpu_pids)" ] && note "WARNING: GPU $GPU_INDEX already has processes; the phases' figures include theirs"
echo "# phase start_ns end_ns role=pid ... (nolimit-run.sh; GPU_INDEX=$GPU_INDEX)" >"$RUN_DIR/phases.txt"

start_collector

# run_phase MODE: the mode's process, its phase once it runs, then gone.
run_phase() {
	local mode=$1 w
	python3 "$here/nolimit.py" --mode "$mode" --device "$GPU_INDEX" --seconds 600 >"$RUN_DIR/$mode.log" 2>&1 &
	w=$!
	pids+=("$w")
	wait_on_gpu "$w"
	for _ in $(seq 1 60); do grep -qE '^(running|holding)' "$RUN_DIR/$mode.log" && break; sleep 0.5; done
	sleep 2 # past the first steps
	phase "$mode" "$mode=$w"
	stop "$w"
	wait_gpu_free
}
for mode in loader batch50 sync1 sleep; do run_phase "$mode"; done

stop_collector

python3 "$here/nolimit-compare.py" --no-promtool "$RUN_DIR"
rc=$?
cp "$RUN_DIR/report.txt" "$OUT/nolimit-report.txt" 2>/dev/null
tar czf "$OUT/nolimit.tgz" -C "$(dirname "$RUN_DIR")" "$(basename "$RUN_DIR")"
exit "$rc"
