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
#   - Debian's prometheus-alertmanager (ALERTMANAGER), when installed
#     beside Prometheus, with the shipped deploy/alertmanager/alertmanager.yml
#     (its routes, grouping and inhibitions) whose receivers all post to the
#     demo's notification log (tools/demowebhook), which prints each
#     notification in this terminal; on DEMO_ALERTMANAGER_PORT (default: the
#     first free port from 9093);
#   - the collector (testdata/collector/demo.yaml), its metrics on
#     DEMO_METRICS_PORT (8889) and health check on DEMO_HEALTH_PORT (13133).
# Ctrl-C, or SIGINT or SIGTERM to this script's PID (printed), stops it all,
# also when it runs in the background.
# Run from the repository root by make, which sets OTELCOL, FAKENVML,
# DEMOKUBELET, DEMOWEBHOOK, PROMETHEUS, ALERTMANAGER, DEMO_SCENARIO and
# DEMO_PODS.
set -euo pipefail
# A background job of a non-interactive shell (`make demo &` in a script)
# starts with SIGINT ignored, and bash can neither trap nor reset a signal
# ignored on entry: run again with SIGINT at its default, so that the trap
# below takes it.
if [ -z "${DEMO_SIGNALS_RESET:-}" ] && env --default-signal=INT true 2>/dev/null; then
	DEMO_SIGNALS_RESET=1 exec env --default-signal=INT "$BASH" "$0" "$@"
fi
: "${OTELCOL:?}" "${FAKENVML:?}" "${DEMOKUBELET:?}" "${DEMO_SCENARIO:?}" "${DEMO_PODS:?}"
PROMETHEUS=${PROMETHEUS:-/usr/bin/prometheus}
ALERTMANAGER=${ALERTMANAGER:-/usr/bin/prometheus-alertmanager}
DEMOWEBHOOK=${DEMOWEBHOOK:-}
METRICS_PORT=${DEMO_METRICS_PORT:-8889}
HEALTH_PORT=${DEMO_HEALTH_PORT:-13133}
root=$PWD
dir=$(mktemp -d)
pids=() # everything started here, stopped by PID on the way out
prom_pid=
am_pid=
stopped() { # stopped PID NAME LOG: say so when PID has died, with the end of its log
	if [ -n "$1" ] && ! kill -0 "$1" 2>/dev/null; then
		echo "demo: $2 had stopped; the end of its log:"
		tail -n 5 "$3"
	fi
}
cleanup() {
	local p
	trap '' INT TERM # once stopping, a second Ctrl-C does not cut it short
	stopped "$prom_pid" Prometheus "$dir/prometheus.log"
	stopped "$am_pid" Alertmanager "$dir/alertmanager.log"
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

listening() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
taken=" $METRICS_PORT $HEALTH_PORT "
free_port() { # free_port FIRST: the first port from FIRST that nothing listens on or was given out here
	local p
	for p in $(seq "$1" $(($1 + 100))); do
		case $taken in *" $p "*) continue ;; esac
		listening "$p" && continue
		taken+="$p "
		echo "$p"
		return
	done
	echo "demo: no free port from $1" >&2
	return 1
}

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
am="no Alertmanager ($ALERTMANAGER missing: apt-get install prometheus-alertmanager, or set ALERTMANAGER=)"
if [ -x "$PROMETHEUS" ]; then
	port=${DEMO_PROMETHEUS_PORT:-$(free_port 9090)}
	taken+="$port "
	alerting=
	if [ -x "$ALERTMANAGER" ] && [ -x "$DEMOWEBHOOK" ]; then
		am_port=${DEMO_ALERTMANAGER_PORT:-$(free_port 9093)}
		taken+="$am_port "
		hook_port=$(free_port 9095)
		"$DEMOWEBHOOK" -listen "127.0.0.1:$hook_port" &
		pids+=($!)
		# The shipped configuration with each receiver posting to the
		# notification log instead (routes, grouping and inhibitions as
		# shipped).
		awk -v url="http://127.0.0.1:$hook_port/" '
			/^receivers:/ { print; inrecv = 1; next }
			inrecv && /^[a-z_]+:/ { inrecv = 0 }
			inrecv {
				if (match($0, /^  - name: */)) {
					name = substr($0, RLENGTH + 1)
					print "  - name: " name
					print "    webhook_configs:"
					print "      - url: " url name
					print "        send_resolved: true"
				}
				next
			}
			{ print }
		' deploy/alertmanager/alertmanager.yml >"$dir/alertmanager.yml"
		# --cluster.listen-address= : no gossip port on every interface.
		"$ALERTMANAGER" --config.file="$dir/alertmanager.yml" --storage.path="$dir/alertmanager" \
			--web.listen-address="127.0.0.1:$am_port" --cluster.listen-address= >"$dir/alertmanager.log" 2>&1 &
		am_pid=$!
		pids+=("$am_pid")
		alerting="alerting:
  alertmanagers:
    - static_configs:
        - targets: [\"127.0.0.1:$am_port\"]"
		am="Alertmanager with the shipped routes http://127.0.0.1:$am_port (its notifications print here as they come)"
	elif [ -x "$ALERTMANAGER" ]; then
		am="no Alertmanager (set DEMOWEBHOOK= to the built tools/demowebhook: make demo does)"
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
		      - targets: ["127.0.0.1:$METRICS_PORT"]
	EOF
	echo "$alerting" >>"$dir/prometheus.yml"
	"$PROMETHEUS" --config.file="$dir/prometheus.yml" --storage.tsdb.path="$dir/prometheus" \
		--web.listen-address="127.0.0.1:$port" >"$dir/prometheus.log" 2>&1 &
	prom_pid=$!
	pids+=("$prom_pid")
	prom="Prometheus with the shipped rules http://127.0.0.1:$port"
else
	am="no Alertmanager (it needs the demo's Prometheus)"
fi

DEMO_DATA=$dir DEMO_KUBELET_SOCKET=$dir/kubelet.sock FAKE_NVML_SCENARIO=$root/$DEMO_SCENARIO \
	FAKENVML_LIBRARY=$FAKENVML "$OTELCOL" --config testdata/collector/demo.yaml \
	--set="exporters::prometheus::endpoint=127.0.0.1:$METRICS_PORT" \
	--set="extensions::health_check::endpoint=127.0.0.1:$HEALTH_PORT" &
collector=$!
pids+=("$collector")
for _ in $(seq 300); do
	listening "$HEALTH_PORT" && break
	kill -0 "$collector" 2>/dev/null || break
	sleep 0.1
done
echo "demo: metrics http://127.0.0.1:$METRICS_PORT/metrics, health http://127.0.0.1:$HEALTH_PORT/, $prom, $am." \
	"Next: the README's three queries there after 5 minutes (which pod wastes GPUs, and why); the holder alerts' notifications after 3 to 10." \
	"Ctrl-C (or kill -INT $$) stops it all."
wait "$collector"
