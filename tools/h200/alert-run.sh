#!/usr/bin/env bash
# The input-bound workload on a real GPU, from the GPU to a notification and
# a report (issue 33, part 7). As root, from the repository root, with
# .carry/ from `make h200-alert-bundle`: otelcol-nvml, Prometheus,
# Alertmanager and otelcol-nvml-report (gzipped), the shipped rules rendered
# as the single-server path renders them (deploy/standalone/values.yaml),
# with durations short enough for a run of minutes
# (tools/h200/alert-values.yaml), and the shipped Alertmanager configuration
# with its receivers turned into webhooks (tools/h200/alert-bundle.py). Nothing is installed, nothing outside the
# machine is reached, and no GPU setting is changed. Any number of GPUs.
#
# Everything listens on 127.0.0.1:
#   - a webhook (alert-webhook.py) that appends each notification to
#     notifications.jsonl, the receiver's name in its path;
#   - Alertmanager with that configuration (routes, grouping, timings and
#     inhibitions as shipped);
#   - Prometheus (scrape every 2 s, rules every 5 s) with the rendered rules,
#     alerting to that Alertmanager;
#   - otelcol-nvml reading every GPU every 2 s, processes and cgroups on,
#     through its Prometheus exporter.
# Then the workload of loaderbound-run.sh's input-bound container: the
# DataLoader loop of loaderbound.py --mode cpu on GPU $GPU_INDEX, in a cgroup
# named like a docker container with a quota of $CPUS CPUs, for
# $WORKLOAD_SECONDS, while nvidia-smi's utilization.gpu is sampled every
# second. $TAIL_SECONDS after it ends, otelcol-nvml-report reads the run's
# range back from Prometheus, and alert-compare.py checks the notification
# and the report against the run's own truth (report.txt). Every process is
# stopped by PID and the cgroup removed on the way out, also when the script
# is stopped early. About 5½ minutes with the defaults (4¾ with FAKE=1).
#
# FAKE=1 runs the same on the simulated NVML (FAKENVML, the built
# libnvidia-ml.so.1), without a GPU, PyTorch, root or cgroups: one simulated
# H200 whose process holds it for $WORKLOAD_SECONDS from $FAKE_LEAD seconds
# after the collector starts, in a simulated docker container (a proc and
# cgroup tree under $RUN_DIR) whose CPU counter moves at 97.5 % of its
# $CPUS-CPU limit. It checks the script, the bundle and the comparison here.
#
# Leaves report.txt, notifications.jsonl and alert.tgz (every reading,
# the Prometheus TSDB, the logs) under $OUT. Exit status: 0 when every
# check passed.
set -u
: "${OUT:?set OUT to a folder for the results}"
FAKE=${FAKE:-0}
GPU_INDEX=${GPU_INDEX:-0}
CPUS=${CPUS:-4}
WORKLOAD_SECONDS=${WORKLOAD_SECONDS:-240}
TAIL_SECONDS=${TAIL_SECONDS:-30}
FAKE_LEAD=${FAKE_LEAD:-15}
FAKENVML=${FAKENVML:-_build/fakenvml/libnvidia-ml.so.1}
CARRY=${CARRY:-.carry}
# Prometheus, Alertmanager, the webhook and the collector's exporter.
PROM_PORT=${PROM_PORT:-19090}
AM_PORT=${AM_PORT:-19093}
HOOK_PORT=${HOOK_PORT:-19095}
COL_PORT=${COL_PORT:-19099}
here=$(dirname "$0")
export GPU_INDEX RUN_DIR=${RUN_DIR:-/tmp/h200alert}
# shellcheck source=tools/h200/run-lib.sh
. "$here/run-lib.sh" # pids, cleanup, note, gpu_pids, wait_on_gpu, stop, machine_info

export CUDA_DEVICE_ORDER=PCI_BUS_ID PYTHONUNBUFFERED=1
rm -rf "$RUN_DIR" && mkdir -p "$RUN_DIR/bin" "$OUT"
# The workload's container: its id as docker names it, and the cgroup.
CID=c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0
cg=
AM_TEMPLATES=/usr/share/prometheus/alertmanager
made_templates=0
# shellcheck disable=SC2317 # the trap calls it
alert_cleanup() {
	# The workload first (its DataLoader workers with it), then what
	# run-lib's cleanup stops: every PID started here.
	if [ -n "$cg" ] && [ -d "$cg" ]; then
		[ -e "$cg/cgroup.kill" ] && echo 1 >"$cg/cgroup.kill"
		# (cgroupfs files have no size: read them.)
		for _ in $(seq 1 40); do [ -n "$(cat "$cg/cgroup.procs" 2>/dev/null)" ] || break; sleep 0.25; done
	fi
	cleanup
	[ "$made_templates" = 1 ] && rm -rf "$AM_TEMPLATES"
	if [ -n "$cg" ] && [ -d "$cg" ]; then
		rmdir "$cg" 2>/dev/null || echo "WARNING: could not remove $cg: $(tr '\n' ' ' <"$cg/cgroup.procs" 2>/dev/null)"
	fi
}

# results: report.txt, the notifications and every reading to $OUT.
results() {
	cp "$RUN_DIR/report.txt" "$OUT/report.txt" 2>/dev/null
	cp "$RUN_DIR/notifications.jsonl" "$OUT/" 2>/dev/null
	tar czf "$OUT/alert.tgz" -C "$(dirname "$RUN_DIR")" --exclude "$(basename "$RUN_DIR")/bin" "$(basename "$RUN_DIR")"
}
# Stopped early (SIGTERM at the device's time limit, Ctrl-C) or failed:
# everything stopped, and what there is to $OUT.
trap 'alert_cleanup; results' EXIT
trap 'exit 130' INT TERM
fail() {
	note "FAILED: $*"
	echo "FAILED: $*" >"$RUN_DIR/report.txt"
	exit 1
}
listening() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
# ready URL NAME PID: until URL answers 200 (60 s at most).
ready() {
	for _ in $(seq 1 120); do
		python3 -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=2)' "$1" 2>/dev/null && return 0
		kill -0 "$3" 2>/dev/null || fail "$2 exited: $(tail -n 5 "$RUN_DIR/$2.log")"
		sleep 0.5
	done
	fail "$2 not ready at $1 after 60 s: $(tail -n 5 "$RUN_DIR/$2.log")"
}

# ---- the bundle ----
for b in otelcol-nvml prometheus prometheus-alertmanager otelcol-nvml-report; do
	if [ -e "$CARRY/$b.gz" ]; then
		gunzip -c "$CARRY/$b.gz" >"$RUN_DIR/bin/$b"
	elif [ -e "$CARRY/$b" ]; then
		cp "$CARRY/$b" "$RUN_DIR/bin/$b"
	else
		continue
	fi
	chmod +x "$RUN_DIR/bin/$b"
done
for f in bin/otelcol-nvml bin/prometheus bin/prometheus-alertmanager; do
	[ -x "$RUN_DIR/$f" ] || fail "$CARRY has no $(basename "$f"): make h200-alert-bundle"
done
for f in rules.yaml alertmanager.yml; do
	[ -s "$CARRY/$f" ] || fail "$CARRY has no $f: make h200-alert-bundle"
done
cp "$CARRY/rules.yaml" "$RUN_DIR/rules.yaml"
for p in "$PROM_PORT" "$AM_PORT" "$HOOK_PORT" "$COL_PORT"; do
	listening "$p" && fail "port $p is taken (PROM_PORT, AM_PORT, HOOK_PORT, COL_PORT)"
done

{
	date -u +%FT%TZ
	echo "FAKE=$FAKE GPU_INDEX=$GPU_INDEX CPUS=$CPUS WORKLOAD_SECONDS=$WORKLOAD_SECONDS TAIL_SECONDS=$TAIL_SECONDS"
	git log -1 --format='commit %H %s' 2>/dev/null
	"$RUN_DIR/bin/otelcol-nvml" --version
	"$RUN_DIR/bin/prometheus" --version 2>&1 | head -1
	"$RUN_DIR/bin/prometheus-alertmanager" --version 2>&1 | head -1
	nproc
} >"$RUN_DIR/versions.txt" 2>&1

# ---- the GPU, real or simulated ----
if [ "$FAKE" = 1 ]; then
	[ -e "$FAKENVML" ] || fail "no simulated NVML at $FAKENVML: make fakenvml"
	FAKENVML=$(realpath "$FAKENVML")
	fake=$RUN_DIR/fake
	FAKE_PID=4200404
	mkdir -p "$fake/proc/1/root/etc" "$fake/proc/$FAKE_PID" "$fake/cgroup/docker-$CID.scope"
	cp testdata/demo/proc/stat "$fake/proc/stat"
	cp testdata/demo/proc/1/root/etc/passwd "$fake/proc/1/root/etc/passwd"
	cp testdata/demo/proc/$FAKE_PID/* "$fake/proc/$FAKE_PID/"
	echo "0::/docker-$CID.scope" >"$fake/proc/$FAKE_PID/cgroup"
	cp testdata/demo/cgroup/cgroup.controllers "$fake/cgroup/"
	echo "$((CPUS * 100000)) 100000" >"$fake/cgroup/docker-$CID.scope/cpu.max"
	python3 - "$fake/scenario.json" "$FAKE_PID" "$FAKE_LEAD" "$WORKLOAD_SECONDS" <<-'EOF'
		# One simulated H200 whose one process starves it: 5 % busy, SM
		# activity 2 %, as the input-bound loader measured on the H200.
		import json, sys
		out, pid, lead, secs = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
		gpu = {
		    "name": "NVIDIA H200 (SIMULATED)", "uuid": "GPU-5151a7ed-de30-4000-8000-0000000a1e27",
		    "serial": "SIMULATED-A1E2", "pci_bus_id": "00000000:19:00.0",
		    "utilization": {"gpu": {"busy": 0.05, "period_s": 2}, "memory": {"busy": 0.01, "period_s": 2}},
		    "memory": {"total_bytes": 150754820096, "reserved_bytes": 617086976, "used_bytes": 3221225472},
		    "temperature_c": 40, "memory_temperature_c": 45, "power_w": 120, "power_limit_w": 700,
		    "clocks_mhz": {"sm": 1980, "graphics": 1980, "memory": 3201, "video": 1755}, "pstate": 0,
		    "processes": [{"pid": pid, "name": "python3", "used_memory_bytes": 2600000000, "type": "compute",
		                   "sm_percent": 2, "from": lead, "until": lead + secs}],
		    "gpm": {"SM_UTIL": 2, "SM_OCCUPANCY": 1, "GRAPHICS_UTIL": 4, "DRAM_BW_UTIL": 1},
		}
		json.dump({"comment": "alert-run.sh FAKE=1: one SIMULATED H200, an input-bound holder",
		           "driver_version": "550.54.15", "nvml_version": "12.550.54.15", "cuda_driver_version": 12040,
		           "sampling": {"hz": 6, "buffer": 120}, "gpus": [gpu]}, open(out, "w"), indent=1)
	EOF
	GPU_UUID=GPU-5151a7ed-de30-4000-8000-0000000a1e27
	export FAKE_NVML_SCENARIO=$fake/scenario.json
	proc_root=$fake/proc cgroup_root=$fake/cgroup
	library="library_path: $FAKENVML"
	# nvidia-smi's utilization.gpu, as the scenario plays it.
	smi_util() { echo 5; }
else
	[ "$(id -u)" = 0 ] || fail "run as root (the workload's cgroup)"
	[ -f /sys/fs/cgroup/cgroup.controllers ] || fail "no cgroup v2 at /sys/fs/cgroup"
	PHASE_SECONDS=$WORKLOAD_SECONDS machine_info # it prints PHASE_SECONDS
	GPU_UUID=$(nvidia-smi -i "$GPU_INDEX" --query-gpu=uuid --format=csv,noheader | tr -d ' ')
	[ -n "$GPU_UUID" ] || fail "nvidia-smi names no GPU $GPU_INDEX"
	[ -n "$(gpu_pids)" ] && note "WARNING: GPU $GPU_INDEX already has processes; its figures include theirs"
	proc_root=/proc cgroup_root=/sys/fs/cgroup
	library=
	smi_util() { nvidia-smi -i "$GPU_INDEX" --query-gpu=utilization.gpu --format=csv,noheader,nounits 2>/dev/null | tr -d ' '; }
fi
note "GPU $GPU_INDEX is $GPU_UUID (FAKE=$FAKE)"

# ---- the webhook, Alertmanager, the collector, Prometheus ----
python3 "$here/alert-webhook.py" --port "$HOOK_PORT" --out "$RUN_DIR/notifications.jsonl" >"$RUN_DIR/webhook.log" 2>&1 &
pids+=($!)
ready "http://127.0.0.1:$HOOK_PORT/" webhook "${pids[-1]}"

sed -e "s#http://webhook.invalid#http://127.0.0.1:$HOOK_PORT#g" -e "s#__REPO__#$PWD#g" \
	"$CARRY/alertmanager.yml" >"$RUN_DIR/alertmanager.yml"
# Debian's Alertmanager reads its notification templates from this folder,
# which a machine without the package lacks: the bundle carries them, and
# the run puts them there for its duration only.
if [ ! -e "$AM_TEMPLATES/default.tmpl" ] && [ -d "$CARRY/amtmpl" ]; then
	mkdir -p "$AM_TEMPLATES" && cp "$CARRY"/amtmpl/*.tmpl "$AM_TEMPLATES/" && made_templates=1
fi
"$RUN_DIR/bin/prometheus-alertmanager" --config.file="$RUN_DIR/alertmanager.yml" \
	--storage.path="$RUN_DIR/alertmanager" --web.listen-address="127.0.0.1:$AM_PORT" \
	--cluster.listen-address= >"$RUN_DIR/alertmanager.log" 2>&1 &
pids+=($!)
ready "http://127.0.0.1:$AM_PORT/-/ready" alertmanager "${pids[-1]}"

cat >"$RUN_DIR/collector.yaml" <<-EOF
	receivers:
	  nvml:
	    # 2 s: a read later than 2.5 intervals is a gap, unobserved time that
	    # held time leaves out; 1 s was too tight on a loaded machine.
	    collection_interval: 2s
	    $library
	    processes:
	      enabled: true
	      proc_root: $proc_root
	      cgroup_root: $cgroup_root
	processors:
	  # As deploy/standalone/collector.yaml: host.name names the host in the
	  # alerts' text (there is no Kubernetes node).
	  resource:
	    attributes:
	      - {key: host.name, value: "$(hostname)", action: upsert}
	exporters:
	  prometheus:
	    endpoint: 127.0.0.1:$COL_PORT
	    # 3 collection intervals: an exited process leaves the endpoint soon.
	    metric_expiration: 6s
	    resource_constant_labels:
	      included: ["*"]
	service:
	  telemetry:
	    metrics:
	      level: none
	  pipelines:
	    metrics:
	      receivers: [nvml]
	      processors: [resource]
	      exporters: [prometheus]
EOF
collector_start=$(now)
"$RUN_DIR/bin/otelcol-nvml" --config "$RUN_DIR/collector.yaml" >"$RUN_DIR/collector.log" 2>&1 &
cpid=$!
pids+=("$cpid")
ready "http://127.0.0.1:$COL_PORT/metrics" collector "$cpid"

cat >"$RUN_DIR/prometheus.yml" <<-EOF
	global:
	  scrape_interval: 2s
	  scrape_timeout: 2s
	  evaluation_interval: 5s
	rule_files: [$RUN_DIR/rules.yaml]
	alerting:
	  alertmanagers:
	    - static_configs:
	        - targets: ["127.0.0.1:$AM_PORT"]
	scrape_configs:
	  - job_name: otelcol-nvml
	    static_configs:
	      - targets: ["127.0.0.1:$COL_PORT"]
EOF
"$RUN_DIR/bin/prometheus" --config.file="$RUN_DIR/prometheus.yml" --storage.tsdb.path="$RUN_DIR/prometheus" \
	--web.listen-address="127.0.0.1:$PROM_PORT" >"$RUN_DIR/prometheus.log" 2>&1 &
pids+=($!)
ready "http://127.0.0.1:$PROM_PORT/-/ready" prometheus "${pids[-1]}"
note "webhook :$HOOK_PORT, alertmanager :$AM_PORT, collector :$COL_PORT, prometheus :$PROM_PORT up"

# nvidia-smi's utilization.gpu every second: unix seconds, percent.
(while :; do echo "$(date +%s.%N) $(smi_util)"; sleep 1; done) >"$RUN_DIR/smi-util.txt" 2>/dev/null &
pids+=($!)

# ---- the workload ----
# cpu_usec CPU_STAT: the cgroup's CPU time so far, in microseconds.
cpu_usec() {
	local v
	v=$(sed -n 's/^usage_usec //p' "$1" 2>/dev/null)
	echo "${v:-0}"
}
# notified: notes the first input_bound notification's arrival, once.
seen=
notified() {
	[ -z "$seen" ] && grep -q GPUHolderInputBound "$RUN_DIR/notifications.jsonl" 2>/dev/null &&
		seen=1 && note "the first GPUHolderInputBound notification arrived"
}
if [ "$FAKE" = 1 ]; then
	# The container's CPU counter at 97.5 % of its limit, as the cgroup's
	# kernel would count the loader's workers.
	stat=$fake/cgroup/docker-$CID.scope/cpu.stat
	(
		t0=$(now)
		while :; do
			u=$((($(now) - t0) * CPUS * 975 / 1000000))
			printf 'usage_usec %d\nuser_usec %d\nsystem_usec %d\n' "$u" $((u * 9 / 10)) $((u / 10)) >"$stat.new"
			mv "$stat.new" "$stat"
			sleep 1
		done
	) &
	pids+=($!)
	start=$((collector_start + FAKE_LEAD * 1000000000))
	end=$((start + WORKLOAD_SECONDS * 1000000000))
	while [ "$(now)" -lt "$start" ]; do sleep 0.1; done
	cpu_start=$(cpu_usec "$stat")
	while [ "$(now)" -lt "$end" ]; do
		notified
		sleep 0.2
	done
	cpu_end=$(cpu_usec "$stat")
else
	echo +cpu >/sys/fs/cgroup/cgroup.subtree_control
	cg=/sys/fs/cgroup/docker-$CID.scope
	mkdir -p "$cg" && echo "$((CPUS * 100000)) 100000" >"$cg/cpu.max"
	# The loop starts inside its cgroup: a shell moves itself in, then execs.
	bash -c "echo \$\$ >$cg/cgroup.procs; exec python3 $here/loaderbound.py --mode cpu --device $GPU_INDEX --seconds $WORKLOAD_SECONDS --workers $CPUS" \
		>"$RUN_DIR/workload.log" 2>&1 &
	wpid=$!
	pids+=("$wpid")
	wait_on_gpu "$wpid" || fail "the workload did not reach GPU $GPU_INDEX: $(tail -n 5 "$RUN_DIR/workload.log")"
	start=$(now)
	cpu_start=$(cpu_usec "$cg/cpu.stat")
	note "workload $wpid on GPU $GPU_INDEX"
	# Its own clock ends it; 60 s past that, it is stopped.
	deadline=$((SECONDS + WORKLOAD_SECONDS + 60))
	while kill -0 "$wpid" 2>/dev/null && [ "$SECONDS" -lt "$deadline" ]; do
		notified
		sleep 0.2
	done
	end=$(now)
	cpu_end=$(cpu_usec "$cg/cpu.stat")
	kill -0 "$wpid" 2>/dev/null && note "WARNING: the workload ran past $WORKLOAD_SECONDS s + 60; stopped" && stop "$wpid"
	wait "$wpid"
	note "workload exited ($?): $(tail -n 1 "$RUN_DIR/workload.log")"
fi
note "workload window $(((end - start) / 1000000)) ms; $TAIL_SECONDS s for the last scrapes"
sleep "$TAIL_SECONDS"
finish=$(now)

cat >"$RUN_DIR/truth.json" <<-EOF
	{"fake": $FAKE, "host": "$(hostname)", "gpu_index": $GPU_INDEX, "gpu_uuid": "$GPU_UUID", "container_id": "$CID",
	 "cpus": $CPUS, "collector_start_ns": $collector_start, "workload_start_ns": $start,
	 "workload_end_ns": $end, "finish_ns": $finish, "cpu_usec_start": $cpu_start, "cpu_usec_end": $cpu_end}
EOF

# ---- the report and the checks ----
report=$RUN_DIR/bin/otelcol-nvml-report
from=$(date -u -d "@$((collector_start / 1000000000))" +%FT%TZ)
to=$(date -u -d "@$((finish / 1000000000 + 1))" +%FT%TZ)
# By user: outside Kubernetes and Slurm the container's holder is its
# processes' owner (root here), the holder_kind of its alert.
if [ -x "$report" ]; then
	for fmt in table json; do
		"$report" --prometheus "http://127.0.0.1:$PROM_PORT" --by user --from "$from" --to "$to" --format "$fmt" \
			>"$RUN_DIR/report.$fmt" 2>"$RUN_DIR/report-$fmt.err"
		echo "exit $?" >>"$RUN_DIR/report-$fmt.err"
	done
	note "report: $(tail -n 1 "$RUN_DIR/report-json.err")"
else
	note "WARNING: no otelcol-nvml-report in $CARRY: the report's checks are skipped"
fi

python3 "$here/alert-compare.py" --run "$RUN_DIR" --prometheus "http://127.0.0.1:$PROM_PORT" \
	--alertmanager "http://127.0.0.1:$AM_PORT" | tee "$RUN_DIR/report.txt"
rc=${PIPESTATUS[0]}

alert_cleanup
trap - EXIT
results
note "exit $rc; $OUT/report.txt"
exit "$rc"
