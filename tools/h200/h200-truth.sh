#!/usr/bin/env bash
# Known-truth run on the lent H200 machine (2 GPUs): GPU 0 runs one spinning
# 32-thread block (spin.py); GPU 1 runs 50 %-duty bf16 matmuls (workload.py)
# inside a cgroup laid out like a Kubernetes container's. otelcol-nvml reads
# both; truth-compare.py checks utilization vs GPM SM activity, and the
# process's container and pod attribution. Binaries from `make h200-bundle`
# in .carry/. Changes no GPU setting; the cgroup is removed at the end.
set -u
: "${OUT:?set OUT to a folder for the results}"
CARRY=.carry
export RUN_DIR=/tmp/h200truth
rm -rf "$RUN_DIR" && mkdir -p "$RUN_DIR"
for f in "$CARRY"/*.gz; do [ -e "$f" ] && gunzip -f "$f"; done
chmod +x "$CARRY"/otelcol-nvml

POD_UID=6f0c2b1e-3d4a-4c5b-9e8f-0a1b2c3d4e5f
CONTAINER_ID=3f1e2d4c5b6a79880123456789abcdef3f1e2d4c5b6a79880123456789abcdef
CG=/sys/fs/cgroup/kubepods.slice/kubepods-pod${POD_UID//-/_}.slice/cri-containerd-${CONTAINER_ID}.scope
{
	date -u +%FT%TZ
	nvidia-smi --query-gpu=index,name,uuid,driver_version --format=csv
	echo "pod_uid=$POD_UID container_id=$CONTAINER_ID cgroup=$CG"
} >"$RUN_DIR/machine.txt" 2>&1
mkdir -p "$CG" 2>>"$RUN_DIR/machine.txt" || echo "cgroup mkdir failed" >>"$RUN_DIR/machine.txt"

python3 tools/h200/spin.py --device 0 --seconds 70 >"$RUN_DIR/spin.log" 2>&1 &
spid=$!
# Start the matmul workload stopped, move it into the cgroup, then let it run.
sh -c 'kill -STOP $$; exec python3 tools/h200/workload.py --device 1 --gib 4 --seconds 70' >"$RUN_DIR/workload.log" 2>&1 &
wpid=$!
sleep 0.5
echo "$wpid" >"$CG/cgroup.procs" 2>>"$RUN_DIR/machine.txt"
kill -CONT "$wpid"
echo "workload_pid=$wpid spin_pid=$spid" >>"$RUN_DIR/machine.txt"
cat "/proc/$wpid/cgroup" >>"$RUN_DIR/machine.txt"
sleep 10
exe=$(basename "$(readlink "/proc/$wpid/exe")")
echo "workload exe=$exe comm=$(cat "/proc/$wpid/comm")" >>"$RUN_DIR/machine.txt"

"$CARRY/otelcol-nvml" --config testdata/collector/h200-check.yaml >"$RUN_DIR/collector.log" 2>&1 &
cpid=$!
for _ in $(seq 1 40); do
	nvidia-smi --query-gpu=timestamp,uuid,memory.used,power.draw,utilization.gpu,temperature.gpu,temperature.memory \
		--format=csv,noheader,nounits >>"$RUN_DIR/smi.csv"
	sleep 1
done
kill -TERM "$cpid"
wait "$cpid"
echo "collector exit: $?" >>"$RUN_DIR/collector.log"
kill "$spid" "$wpid" 2>/dev/null
wait "$spid" "$wpid" 2>/dev/null
rmdir "$CG" "$(dirname "$CG")" 2>/dev/null

python3 tools/h200/truth-compare.py "$RUN_DIR/metrics.jsonl" "$wpid" "$CONTAINER_ID" "$POD_UID" "$exe" | tee "$RUN_DIR/report.txt"
cp "$RUN_DIR/report.txt" "$OUT/truth-report.txt"
tar czf "$OUT/h200truth.tgz" -C /tmp h200truth
