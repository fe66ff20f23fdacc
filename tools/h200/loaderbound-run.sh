#!/usr/bin/env bash
# The "input-bound or GPU-bound?" check on real GPUs (issue "Ship it",
# section 5). Runs on a machine with 2+ GPUs, as root (it creates two
# cgroups), from the repository root, with otelcol-nvml in .carry/
# (make h200-bundle). Leaves report.txt and every reading under $OUT.
#
# Two training loops run side by side, each in its own cgroup named like a
# docker container (so the receiver resolves a container id) with a quota of
# $CPUS CPUs: an input-bound one (DataLoader workers doing heavy CPU work) on
# GPU 0, a GPU-bound one (bf16 matmuls, trivial input) on GPU 1. otelcol-nvml
# reads both GPUs and both containers' cgroups; loaderbound-compare.py checks
# that the first reads as CPU at its limit with the GPU underused, and the
# second as the GPU busy with CPU to spare. It changes no GPU setting.
set -u
: "${OUT:?set OUT to a folder for the results}"
CPUS=${CPUS:-4}
SECONDS_RUN=${SECONDS_RUN:-90}
CARRY=.carry
RUN=/tmp/loaderbound
rm -rf "$RUN" && mkdir -p "$RUN"
for f in "$CARRY"/*.gz; do [ -e "$f" ] && gunzip -f "$f"; done
chmod +x "$CARRY/otelcol-nvml"
{
	date -u +%FT%TZ
	nvidia-smi --query-gpu=index,name,uuid,driver_version --format=csv
	nproc
} >"$RUN/machine.txt" 2>&1

ids=(c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0
	6060606060606060606060606060606060606060606060606060606060606060)
modes=(cpu gpu)
cgdirs=()
if [ -f /sys/fs/cgroup/cgroup.controllers ]; then
	echo +cpu >/sys/fs/cgroup/cgroup.subtree_control
	for i in 0 1; do
		d=/sys/fs/cgroup/docker-${ids[$i]}.scope
		mkdir -p "$d" && echo "$((CPUS * 100000)) 100000" >"$d/cpu.max"
		cgdirs+=("$d")
	done
else
	for i in 0 1; do
		for c in cpu cpuacct; do mkdir -p /sys/fs/cgroup/$c/docker/${ids[$i]}; done
		echo $((CPUS * 100000)) >/sys/fs/cgroup/cpu/docker/${ids[$i]}/cpu.cfs_quota_us
		cgdirs+=("/sys/fs/cgroup/cpu/docker/${ids[$i]} /sys/fs/cgroup/cpuacct/docker/${ids[$i]}")
	done
fi

# Each loop starts inside its cgroup: a shell moves itself in, then execs.
pids=()
for i in 0 1; do
	bash -c "for d in ${cgdirs[$i]}; do echo \$\$ >\$d/cgroup.procs; done; exec python3 tools/h200/loaderbound.py --mode ${modes[$i]} --device $i --seconds $SECONDS_RUN --workers $CPUS" \
		>"$RUN/loop-${modes[$i]}.log" 2>&1 &
	pids+=($!)
done
sleep 20 # CUDA contexts, worker start-up

cat >"$RUN/config.yaml" <<CFG
receivers:
  nvml:
    collection_interval: 2s
    processes: {enabled: true, proc_root: /proc, cgroup_root: /sys/fs/cgroup}
exporters:
  file: {path: $RUN/metrics.jsonl, flush_interval: 1s}
service:
  pipelines:
    metrics: {receivers: [nvml], exporters: [file]}
  telemetry: {metrics: {level: none}}
CFG
"$CARRY/otelcol-nvml" --config "$RUN/config.yaml" >"$RUN/collector.log" 2>&1 &
cpid=$!
sleep 40
kill -TERM "$cpid"
wait "$cpid"
kill "${pids[@]}" 2>/dev/null
wait "${pids[@]}" 2>/dev/null
for i in 0 1; do for d in ${cgdirs[$i]}; do rmdir "$d" 2>/dev/null; done; done

python3 tools/h200/loaderbound-compare.py "$RUN/metrics.jsonl" "${ids[0]}" "${ids[1]}" | tee "$RUN/report.txt"
cp "$RUN/report.txt" "$OUT/report.txt"
tar czf "$OUT/loaderbound.tgz" -C /tmp loaderbound
