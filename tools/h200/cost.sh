#!/usr/bin/env bash
# The cost probe on a lent GPU machine, with any number of GPUs. The load:
# with 2 or more GPUs, the issue-10 one (GPU 0 one spinning block, spin.py;
# GPU 1 a 50 %-duty bf16 matmul, workload.py); with one GPU, a 50 %-duty
# matmul on GPU $GPU_INDEX (default 0), as the 2026-12-01 single-GPU
# baseline was measured. Arguments: label=DIR for each build to compare,
# each DIR holding otelcol-nvml and receivercost.test, gzipped or not (see
# docs/runs/h200-runs.md). Leaves cost.md, cost.json and h200cost.tgz (every log)
# under $OUT. Changes no GPU setting.
set -u
: "${OUT:?set OUT to a folder for the results}"
mkdir -p "$OUT"
: "${COST_SECONDS:=45}"
GPU_INDEX=${GPU_INDEX:-0}
RUN_DIR=${RUN_DIR:-/tmp/h200cost}
here=$(dirname "$0")
# CUDA numbers the GPUs as NVML (and nvidia-smi) do.
export CUDA_DEVICE_ORDER=PCI_BUS_ID
rm -rf "$RUN_DIR" && mkdir -p "$RUN_DIR"
for b in "$@"; do # label=DIR; the bundle's binaries may still be gzipped
	for f in "${b#*=}"/*.gz; do [ -e "$f" ] && gunzip -f "$f"; done
	chmod +x "${b#*=}"/otelcol-nvml "${b#*=}"/receivercost.test 2>/dev/null
done
gpus=$(nvidia-smi --query-gpu=index --format=csv,noheader | wc -l)
loads=()
if [ "$gpus" -ge 2 ]; then
	load="$gpus GPUs: GPU 0 one spinning block, GPU 1 a 50 %-duty matmul"
	python3 "$here/spin.py" --device 0 --seconds 600 >"$RUN_DIR/cost-spin.log" 2>&1 &
	loads+=($!)
	python3 "$here/workload.py" --device 1 --gib 4 --seconds 600 >"$RUN_DIR/cost-workload.log" 2>&1 &
	loads+=($!)
else
	load="1 GPU: GPU $GPU_INDEX a 50 %-duty matmul"
	python3 "$here/workload.py" --device "$GPU_INDEX" --gib 4 --seconds 600 >"$RUN_DIR/cost-workload.log" 2>&1 &
	loads+=($!)
fi
sleep 12
{
	echo "load: $load"
	nvidia-smi --query-gpu=index,name,driver_version,utilization.gpu --format=csv
} >"$RUN_DIR/cost-machine.txt" 2>&1
python3 "$here/cost.py" --out "$RUN_DIR" --seconds "$COST_SECONDS" --load "$load" "$@" | tee "$RUN_DIR/cost.md"
kill "${loads[@]}" 2>/dev/null
wait "${loads[@]}" 2>/dev/null
cp "$RUN_DIR/cost.md" "$RUN_DIR/cost.json" "$OUT/" 2>/dev/null
tar czf "$OUT/h200cost.tgz" -C "$(dirname "$RUN_DIR")" "$(basename "$RUN_DIR")"
