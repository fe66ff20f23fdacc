#!/usr/bin/env bash
# CUDA MPS on a real GPU (issue 34, part 1): checks the collector's figures
# against the MPS model (docs/design/waste.md, "MPS"). Runs as root (it
# makes two cgroups), from the repository root, with otelcol-nvml in .carry/
# (make h200-bundle; CARRY= another folder), python3 and PyTorch; about 90 s. Leaves
# report.txt and mps.tgz (every reading) under $OUT.
#
# It changes no GPU setting: no compute mode, MIG, clocks, persistence or
# reset. It starts its own MPS control daemon (its own pipe and log
# directories, GPU $GPU only) in the GPU's current compute mode, which must
# be Default, and stops it at the end.
#
# Two MPS clients run on GPU $GPU, each in a cgroup named like a docker
# container (so that the receiver resolves a container id): a 50 %-duty
# bf16 matmul loop (workload.py) and a one-SM spinner (mps-spin.py).
# otelcol-nvml reads the GPU to a file for $COLLECT s while they run and
# $AFTER s after they stop (the server alone); mps-compare.py checks its
# figures and the clients' memory against nvidia-smi. Then the daemon quits
# (echo quit | nvidia-cuda-mps-control) and no MPS process of this run may
# be left (checked by PID).
set -u
: "${OUT:?set OUT to a folder for the results}"
GPU=${GPU:-0}
COLLECT=${COLLECT:-40}
AFTER=${AFTER:-10}
WARMUP=${WARMUP:-20}
CARRY=${CARRY:-.carry}
RUN=$(mktemp -d /tmp/mps-run.XXXXXX)
PIPE=$RUN/pipe
LOGS=$RUN/log
mkdir -p "$PIPE" "$LOGS" "$OUT"
fail=0
note() { echo "$*" | tee -a "$RUN/steps.txt"; }

finish() {
	cp "$RUN/report.txt" "$OUT/report.txt" 2>/dev/null
	tar czf "$OUT/mps.tgz" -C "$(dirname "$RUN")" "$(basename "$RUN")" 2>/dev/null
	exit "$fail"
}

for f in "$CARRY"/*.gz; do [ -e "$f" ] && gunzip -f "$f"; done
chmod +x "$CARRY/otelcol-nvml" 2>/dev/null
{
	date -u +%FT%TZ
	nvidia-smi --query-gpu=index,name,uuid,driver_version,compute_mode,mig.mode.current --format=csv
	nproc
} >"$RUN/machine.txt" 2>&1
UUID=$(nvidia-smi -i "$GPU" --query-gpu=uuid --format=csv,noheader | tr -d ' ')
MODE=$(nvidia-smi -i "$GPU" --query-gpu=compute_mode --format=csv,noheader | tr -d ' ')
echo "gpu $UUID" >"$RUN/ids.txt"
if [ "$MODE" != "Default" ]; then
	note "FAIL GPU $GPU is in compute mode $MODE; this run needs Default and changes no GPU setting"
	fail=1
	cp "$RUN/steps.txt" "$RUN/report.txt"
	finish
fi

# The MPS processes already on the machine (another daemon's): never ours.
mps_pids() {
	for p in /proc/[0-9]*; do
		case "$(readlink "$p/exe" 2>/dev/null)" in
		*/nvidia-cuda-mps-control | */nvidia-cuda-mps-server) echo "${p#/proc/}" ;;
		esac
	done | sort # comm(1)'s order
}
mps_pids >"$RUN/mps-before.txt"

# The daemon, on GPU $GPU only, with its own directories.
export CUDA_MPS_PIPE_DIRECTORY=$PIPE CUDA_MPS_LOG_DIRECTORY=$LOGS
CUDA_VISIBLE_DEVICES=$GPU nvidia-cuda-mps-control -d
sleep 2
comm -13 "$RUN/mps-before.txt" <(mps_pids) >"$RUN/mps-ours.txt"
note "MPS control daemon: $(tr '\n' ' ' <"$RUN/mps-ours.txt")"

# Two docker-like cgroups; each client moves itself in, then execs. The
# clients see the daemon's GPU as device 0.
ids=(3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c
	5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e)
# They end by themselves when the collection does: a client killed in the
# middle of a kernel makes MPS report an Xid 31 (a fault) on the GPU.
cmds=("python3 tools/h200/workload.py --device 0 --gib 1 --duty 0.5 --seconds $((WARMUP + COLLECT))"
	"python3 tools/h200/mps-spin.py --device 0 --seconds $((WARMUP + COLLECT))")
cgdirs=()
if [ -f /sys/fs/cgroup/cgroup.controllers ]; then
	for i in 0 1; do
		d=/sys/fs/cgroup/docker-${ids[$i]}.scope
		mkdir -p "$d" && cgdirs+=("$d")
	done
else
	for i in 0 1; do
		for c in cpu cpuacct; do mkdir -p "/sys/fs/cgroup/$c/docker/${ids[$i]}"; done
		cgdirs+=("/sys/fs/cgroup/cpu/docker/${ids[$i]} /sys/fs/cgroup/cpuacct/docker/${ids[$i]}")
	done
fi
pids=()
for i in 0 1; do
	bash -c "for d in ${cgdirs[$i]}; do echo \$\$ >\$d/cgroup.procs; done; exec ${cmds[$i]}" >"$RUN/client-$i.log" 2>&1 &
	pids+=($!)
	echo "client $! ${ids[$i]}" >>"$RUN/ids.txt"
done
sleep "$WARMUP" # the CUDA contexts through MPS
comm -13 "$RUN/mps-before.txt" <(mps_pids) >"$RUN/mps-ours.txt"
note "MPS processes of this run: $(tr '\n' ' ' <"$RUN/mps-ours.txt")"

cat >"$RUN/config.yaml" <<CFG
receivers:
  nvml:
    collection_interval: 1s
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
for ((s = 0; s < COLLECT; s += 5)); do
	nvidia-smi -i "$GPU" --query-compute-apps=pid,process_name,used_memory --format=csv,noheader,nounits >>"$RUN/smi-apps.csv" 2>&1
	nvidia-smi -i "$GPU" --query-gpu=timestamp,utilization.gpu,memory.used --format=csv,noheader >>"$RUN/smi-gpu.csv" 2>&1
	sleep 5
done
for ((s = 0; s < 30; s++)); do
	alive=0
	for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
	[ "$alive" = 0 ] && break
	sleep 1
done
for p in "${pids[@]}"; do kill "$p" 2>/dev/null && note "client $p did not end by itself: killed"; done
wait "${pids[@]}" 2>/dev/null
echo "clients_stopped $(date +%s.%N)" >"$RUN/times.txt"
sleep "$AFTER"
nvidia-smi -i "$GPU" --query-compute-apps=pid,process_name,used_memory --format=csv,noheader,nounits >"$RUN/smi-apps-after.csv" 2>&1
kill -TERM "$cpid"
wait "$cpid"
for i in 0 1; do for d in ${cgdirs[$i]}; do rmdir "$d" 2>/dev/null; done; done

python3 tools/h200/mps-compare.py "$RUN" >"$RUN/report.txt" 2>&1 || fail=1

# Quit the daemon; no MPS process of this run may be left.
echo quit | nvidia-cuda-mps-control >>"$RUN/steps.txt" 2>&1
comm -13 "$RUN/mps-before.txt" <(mps_pids) >>"$RUN/mps-ours.txt"
sort -u -o "$RUN/mps-ours.txt" "$RUN/mps-ours.txt"
left=""
for ((s = 0; s < 20; s++)); do
	left=""
	while read -r p; do [ -n "$p" ] && kill -0 "$p" 2>/dev/null && left="$left $p"; done <"$RUN/mps-ours.txt"
	[ -z "$left" ] && break
	sleep 0.5
done
if [ -z "$left" ] && [ -s "$RUN/mps-ours.txt" ]; then
	echo "PASS the MPS daemon quit: none of this run's MPS processes ($(tr '\n' ' ' <"$RUN/mps-ours.txt")) is left" >>"$RUN/report.txt"
else
	echo "FAIL MPS processes of this run left:${left:- (none was found to start with)}" >>"$RUN/report.txt"
	fail=1
fi
cat "$RUN/report.txt"
finish
