#!/usr/bin/env bash
# Runs on the lent H200 machine, from the repository root, with the amd64
# .deb (make packages) in .carry/. Checks on the real driver what the
# package's unit relies on but the simulated NVML cannot show: NVML and
# the attribution work as an unprivileged user with no capability and
# no_new_privs (the unit's User=, CapabilityBoundingSet=, NoNewPrivileges=),
# with the package's default config. Where systemd runs (PID 1), it also
# installs the package, starts the unit itself (DevicePolicy=closed,
# the system-call filter, MemoryDenyWriteExecute...) and removes it again.
# Leaves report.txt and the collector's logs under $OUT. It changes no GPU
# setting: it only reads, and runs a PyTorch workload on GPU 0.
set -u
: "${OUT:?set OUT to a folder for the results}"
deb=
for f in .carry/otelcol-nvml_*_amd64.deb; do [ -e "$f" ] && deb=$f; done
[ -n "$deb" ] || { echo "no .carry/otelcol-nvml_*_amd64.deb: cp _build/packages/otelcol-nvml_*_amd64.deb .carry/" >&2; exit 1; }
RUN_DIR=/tmp/packagecheck
rm -rf "$RUN_DIR" && mkdir -p "$RUN_DIR/root"
dpkg-deb -x "$deb" "$RUN_DIR/root"
chmod 0755 "$RUN_DIR/root" "$RUN_DIR"
report=$RUN_DIR/report.txt
: >"$report"
say() { echo "$*" | tee -a "$report"; }

# scrape PORT: the Prometheus endpoint's body, after up to 60 s of waiting
# for the GPUs' and the processes' series.
scrape() {
	local body
	for _ in $(seq 60); do
		body=$(python3 -c 'import sys, urllib.request; print(urllib.request.urlopen(sys.argv[1], timeout=5).read().decode())' \
			"http://127.0.0.1:$1/metrics" 2>/dev/null) &&
			grep -q '^hw_gpu_utilization_ratio{' <<<"$body" && grep -q '^nvidia_gpu_process_memory_usage_bytes{.*process_pid=' <<<"$body" && break
		sleep 1
	done
	echo "$body"
}

# check NAME BODY: GPUs and the workload's process, with its owner (root,
# another user than the collector's: attribution without privileges).
check() {
	local gpus procs owner
	gpus=$(grep -c '^hw_gpu_utilization_ratio{' <<<"$2")
	procs=$(grep -c '^nvidia_gpu_process_memory_usage_bytes{.*process_pid=' <<<"$2")
	owner=$(grep -o 'process_owner="[^"]*"' <<<"$2" | sort -u | tr '\n' ' ')
	say "$1: GPU series $gpus, process series $procs, owners: $owner"
	if [ "$gpus" -ge 1 ] && [ "$procs" -ge 1 ] && [ -n "$owner" ]; then say "$1: PASS"; else say "$1: FAIL"; fi
}

python3 tools/h200/workload.py --device 0 --gib 4 --seconds 150 >"$RUN_DIR/workload.log" 2>&1 &
wpid=$!
sleep 12
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee -a "$report"

# 1. The unit's identity and privileges, without systemd: nobody, no
# capability, no_new_privs, the packaged config (ports moved off the
# defaults through its environment variables).
PROMETHEUS_PORT=18889 HEALTH_PORT=18133 TELEMETRY_PORT=18888 COLLECTION_INTERVAL=2s \
	setpriv --reuid=65534 --regid=65534 --clear-groups --no-new-privs --inh-caps=-all --bounding-set=-all \
	"$RUN_DIR/root/usr/bin/otelcol-nvml" --config="$RUN_DIR/root/etc/otelcol-nvml/config.yaml" \
	>"$RUN_DIR/setpriv.log" 2>&1 &
cpid=$!
body=$(scrape 18889)
echo "$body" >"$RUN_DIR/setpriv-metrics.txt"
check "setpriv (uid 65534, no capabilities, no_new_privs)" "$body"
kill -TERM "$cpid"; wait "$cpid"

# 2. The unit itself, where systemd runs.
if [ -d /run/systemd/system ]; then
	DEBIAN_FRONTEND=noninteractive dpkg -i "$deb" >"$RUN_DIR/dpkg.log" 2>&1
	systemctl start otelcol-nvml
	body=$(scrape 8889)
	echo "$body" >"$RUN_DIR/unit-metrics.txt"
	check "systemd unit" "$body"
	systemd-analyze security otelcol-nvml.service >"$RUN_DIR/security.txt" 2>&1
	journalctl -u otelcol-nvml --no-pager >"$RUN_DIR/unit.log" 2>&1
	dpkg --purge otelcol-nvml >>"$RUN_DIR/dpkg.log" 2>&1
else
	say "systemd unit: not run (systemd is not PID 1 here)"
fi

kill "$wpid" 2>/dev/null; wait "$wpid" 2>/dev/null
cp "$report" "$OUT/report.txt"
tar czf "$OUT/packagecheck.tgz" --exclude packagecheck/root -C /tmp packagecheck
