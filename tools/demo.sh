#!/usr/bin/env bash
# make demo: otelcol-nvml on the SIMULATED NVML, with everything around it
# that a node would have, all on 127.0.0.1 and all stopped by PID on the way
# out (Ctrl-C):
#   - the simulated kubelet (tools/demokubelet) on DEMO_PODS, on a socket in
#     a temporary directory;
#   - the demo's proc and cgroup trees (testdata/demo), copied into that
#     directory, where the containers of testdata/demo/cpu-rates use CPU:
#     their cpu.stat counters move at the rate given there (so the loader
#     pod at its CPU limit reads input_bound);
#   - Debian's prometheus (PROMETHEUS), when installed, with the shipped
#     rules (deploy/prometheus/rules.yaml) and the demo's stand-in for
#     kube-state-metrics (testdata/demo/kube-state-metrics.rules.yaml, the
#     GPU quotas), scraping the collector, on DEMO_PROMETHEUS_PORT (default:
#     the first free port from 9090);
#   - the collector (testdata/collector/demo.yaml), in the foreground.
# Run from the repository root by make, which sets OTELCOL, FAKENVML,
# DEMOKUBELET, PROMETHEUS, DEMO_SCENARIO and DEMO_PODS.
set -euo pipefail
: "${OTELCOL:?}" "${FAKENVML:?}" "${DEMOKUBELET:?}" "${DEMO_SCENARIO:?}" "${DEMO_PODS:?}"
PROMETHEUS=${PROMETHEUS:-/usr/bin/prometheus}
root=$PWD
dir=$(mktemp -d)
pids=()
prom_pid=
cleanup() {
	local p
	if [ -n "$prom_pid" ] && ! kill -0 "$prom_pid" 2>/dev/null; then
		echo "demo: Prometheus had stopped; the end of its log:"
		tail -n 5 "$dir/prometheus.log"
	fi
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

listening() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# The proc and cgroup trees, where the CPU counters may move without
# touching the repository's copy.
cp -R testdata/demo/proc testdata/demo/cgroup "$dir/"

"$DEMOKUBELET" -pods "$DEMO_PODS" -socket "$dir/kubelet.sock" &
pids+=($!)
for _ in $(seq 100); do
	test -S "$dir/kubelet.sock" && break
	kill -0 "${pids[-1]}" 2>/dev/null || exit 1
	sleep 0.1
done
test -S "$dir/kubelet.sock" || { echo "demo: the simulated kubelet did not start"; exit 1; }

# Each line of cpu-rates: a container's cgroup directory and the
# millicores it uses; its cpu.stat counts on from the committed value.
move_cpu() {
	local dirs=() rates=() bases=() d r t0 ms i usage
	while read -r d r; do
		case $d in '' | '#'*) continue ;; esac
		dirs+=("$dir/cgroup/$d")
		rates+=("$r")
		bases+=("$(sed -n 's/^usage_usec //p' "$dir/cgroup/$d/cpu.stat")")
	done <testdata/demo/cpu-rates
	t0=$(date +%s%N)
	while sleep 1; do
		ms=$((($(date +%s%N) - t0) / 1000000))
		for i in "${!dirs[@]}"; do
			usage=$((bases[i] + ms * rates[i]))
			printf 'usage_usec %d\nuser_usec %d\nsystem_usec %d\n' "$usage" $((usage * 9 / 10)) $((usage / 10)) \
				>"${dirs[i]}/cpu.stat.new"
			mv "${dirs[i]}/cpu.stat.new" "${dirs[i]}/cpu.stat"
		done
	done
}
move_cpu &
pids+=($!)

prom="no Prometheus ($PROMETHEUS missing: apt-get install prometheus, or set PROMETHEUS=)"
if [ -x "$PROMETHEUS" ]; then
	port=${DEMO_PROMETHEUS_PORT:-}
	if [ -z "$port" ]; then
		for port in $(seq 9090 9190); do listening "$port" || break; done
	fi
	cat >"$dir/prometheus.yml" <<-EOF
		global:
		  scrape_interval: 15s
		  evaluation_interval: 15s
		rule_files:
		  - $root/deploy/prometheus/rules.yaml
		  - $root/testdata/demo/kube-state-metrics.rules.yaml
		scrape_configs:
		  - job_name: otelcol-nvml
		    static_configs:
		      - targets: ["127.0.0.1:8889"]
	EOF
	"$PROMETHEUS" --config.file="$dir/prometheus.yml" --storage.tsdb.path="$dir/prometheus" \
		--web.listen-address="127.0.0.1:$port" >"$dir/prometheus.log" 2>&1 &
	prom_pid=$!
	pids+=("$prom_pid")
	prom="Prometheus with the shipped rules http://127.0.0.1:$port"
fi

DEMO_DATA=$dir DEMO_KUBELET_SOCKET=$dir/kubelet.sock FAKE_NVML_SCENARIO=$root/$DEMO_SCENARIO \
	FAKENVML_LIBRARY=$FAKENVML "$OTELCOL" --config testdata/collector/demo.yaml &
collector=$!
pids+=("$collector")
for _ in $(seq 300); do
	listening 13133 && break
	kill -0 "$collector" 2>/dev/null || break
	sleep 0.1
done
echo "demo: metrics http://127.0.0.1:8889/metrics, health http://127.0.0.1:13133/, $prom." \
	"Next: the README's three queries there after 5 minutes (which pod wastes GPUs, and why); Ctrl-C stops it all."
wait "$collector"
