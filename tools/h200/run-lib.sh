# Helpers of the known-truth runs on one GPU (waste-run.sh, nolimit-run.sh),
# sourced by them. They read GPU_INDEX (the NVML index), RUN_DIR (where the
# run's files go), PHASE_SECONDS and CARRY (the folder with otelcol-nvml).
# shellcheck shell=bash

# prepare_run: a fresh $RUN_DIR, otelcol-nvml unpacked, and CUDA numbering
# the GPUs as NVML (and nvidia-smi) do.
prepare_run() {
	export CUDA_DEVICE_ORDER=PCI_BUS_ID PYTHONUNBUFFERED=1
	rm -rf "$RUN_DIR" && mkdir -p "$RUN_DIR" "$OUT"
	[ -e "$CARRY/otelcol-nvml.gz" ] && gunzip -f "$CARRY/otelcol-nvml.gz"
	chmod +x "$CARRY/otelcol-nvml"
}

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
# machine_info: the GPUs, the driver and the Python packages, to
# $RUN_DIR/machine.txt.
machine_info() {
	{
		date -u +%FT%TZ
		nvidia-smi --query-gpu=index,name,uuid,driver_version,memory.used --format=csv
		echo "GPU_INDEX=$GPU_INDEX PHASE_SECONDS=$PHASE_SECONDS"
		echo "processes on GPU $GPU_INDEX before the run:"
		nvidia-smi -i "$GPU_INDEX" --query-compute-apps=pid,process_name,used_memory --format=csv
		python3 -c 'import torch; print("torch", torch.__version__)'
		python3 -c 'import cupy; print("cupy", cupy.__version__)'
	} >"$RUN_DIR/machine.txt" 2>&1
}
# start_collector: otelcol-nvml with testdata/collector/h200-waste.yaml (1 s
# reads of GPU_INDEX, processes on, to $RUN_DIR/metrics.jsonl), once it has
# written its first metrics; its PID in cpid.
start_collector() {
	"$CARRY/otelcol-nvml" --config testdata/collector/h200-waste.yaml >"$RUN_DIR/collector.log" 2>&1 &
	cpid=$!
	pids+=("$cpid")
	for _ in $(seq 1 30); do [ -s "$RUN_DIR/metrics.jsonl" ] && break; sleep 0.5; done
	[ -s "$RUN_DIR/metrics.jsonl" ] || note "WARNING: no metrics after 15 s"
	sleep 3
	note "collector $cpid running"
}
# stop_collector: SIGTERM (SIGKILL after 15 s), then its warnings and errors
# to $RUN_DIR/collector-warnings.txt.
stop_collector() {
	kill -TERM "$cpid"
	for _ in $(seq 1 30); do kill -0 "$cpid" 2>/dev/null || break; sleep 0.5; done
	kill -0 "$cpid" 2>/dev/null && note "WARNING: the collector did not stop in 15 s of SIGTERM; killed" && kill -KILL "$cpid"
	wait "$cpid"
	echo "collector exit: $?" >>"$RUN_DIR/collector.log"
	grep -iE $'\t(warn|error)\t' "$RUN_DIR/collector.log" | head -20 >"$RUN_DIR/collector-warnings.txt"
	note "collector stopped; $(wc -l <"$RUN_DIR/metrics.jsonl") lines; $(wc -l <"$RUN_DIR/collector-warnings.txt") warnings/errors in its log"
}
