#!/usr/bin/env bash
# The cost probe on the lent H200 machine (2 GPUs), under the load:
# GPU 0 runs one spinning block (spin.py), GPU 1 a 50 %-duty bf16 matmul
# (workload.py). Arguments: label=DIR for each build to compare, each DIR
# holding otelcol-nvml and receivercost.test (see docs/h200-runs.md).
# Writes cost.md, cost.json and the logs under $OUT. Changes no GPU setting.
set -u
: "${OUT:?set OUT to a folder for the results}"
: "${COST_SECONDS:=45}"
here=$(dirname "$0")
for b in "$@"; do # label=DIR; the bundle's binaries may still be gzipped
	for f in "${b#*=}"/*.gz; do [ -e "$f" ] && gunzip -f "$f"; done
	chmod +x "${b#*=}"/otelcol-nvml "${b#*=}"/receivercost.test 2>/dev/null
done
python3 "$here/spin.py" --device 0 --seconds 600 >"$OUT/cost-spin.log" 2>&1 &
spid=$!
python3 "$here/workload.py" --device 1 --gib 4 --seconds 600 >"$OUT/cost-workload.log" 2>&1 &
wpid=$!
sleep 12
nvidia-smi --query-gpu=index,name,driver_version,utilization.gpu --format=csv >"$OUT/cost-machine.txt" 2>&1
python3 "$here/cost.py" --out "$OUT" --seconds "$COST_SECONDS" "$@" | tee "$OUT/cost.md"
kill "$spid" "$wpid" 2>/dev/null
wait "$spid" "$wpid" 2>/dev/null
