#!/usr/bin/env bash
# The cost and the truth on N GPUs (issue 19), for any number of GPUs N. Runs
# on the GPU machine from the repository root, with .carry/ from
# `make h200-bundle` (otelcol-nvml, receivercost.test, scrapecost; gzipped or
# not). Leaves scale.md, scale.json, plan.txt and h200scale.tgz (every reading)
# under $OUT; exits with scale-compare.py's status.
#
# The load, on every GPU i, for the whole run:
#   even i: a 50 %-duty bf16 matmul, 4 GiB held (workload.py);
#   odd i:  one spinning 32-thread block (spin.py)
#   (LOAD_ORDER=spin-first swaps them, so that one GPU alone can be the spin);
#   and $HOLDERS (8) processes that each hold $HOLD_MIB (256) MiB and sleep
#   (scale-hold.py).
# PART=cost: for n in 1 2 4 8 (those <= N, and N itself; COUNTS overrides),
#   the collector (nvml at 1 s, `devices:` the first n GPUs, the rest of the
#   receiver at its defaults -> debug) for $COST_SECONDS (60) after a $WARMUP
#   (10) s warm-up: its CPU per second (/proc/<pid>/stat, and each second
#   from the threads' schedstat) and RSS; then `nvidia-smi -i <those n>
#   --query-gpu=<cost.py's 15 fields>` timed 10 times. Last receivercost.test
#   (it reads every GPU: it takes no device selection).
# PART=wall: the same collector runs again with its internal traces on, sent
#   to a second collector that writes them to a file: the span of each scrape
#   ("scraper/nvml/ScrapeMetrics") is its wall time per count. (Apart from
#   the cost runs, because the traces cost CPU of their own.)
# PART=truth: one collector (nvml at 1 s, every GPU, defaults -> file) for
#   $TRUTH_SECONDS (45), nvidia-smi's processes beside it, checked per GPU by
#   scale-compare.py. TRUTH_SWAP=1 (the default on one GPU, which has only
#   one of the two loads) then swaps each GPU's load for the other kind, the
#   holders staying, and checks the truths again (truth-swap-*).
# PART=all: all three in one call; or a comma-separated list. PART=auto
#   (default): all when the plan's estimate (rounded up) fits $BUDGET_S
#   (540 s), else cost now and wall,truth in a second call; a step that would
#   end past $DEADLINE_S (575 s) is skipped, and the report says so.
# PLAN_ONLY=1 prints the plan and exits.
#
# Changes no GPU setting (no MIG, clocks, power limit, persistence, compute
# mode, accounting mode, reset): it only reads, and runs CUDA processes.
set -u
: "${OUT:?set OUT to a folder for the results}"
T_START=$SECONDS
CARRY=${CARRY:-.carry}
PART=${PART:-auto}
BUDGET_S=${BUDGET_S:-540}
DEADLINE_S=${DEADLINE_S:-575} # never start a step that would end past this
COST_SECONDS=${COST_SECONDS:-60}
WARMUP=${WARMUP:-10}
TRUTH_SECONDS=${TRUTH_SECONDS:-45}
HOLDERS=${HOLDERS:-8}
HOLD_MIB=${HOLD_MIB:-256}
LOAD_ORDER=${LOAD_ORDER:-matmul-first}
SINK_PORT=${SINK_PORT:-14399}
here=$(dirname "$0")
RUN_DIR=${RUN_DIR:-/tmp/h200scale}
# CUDA numbers the GPUs as NVML (and nvidia-smi) do.
export CUDA_DEVICE_ORDER=PCI_BUS_ID PYTHONUNBUFFERED=1

mkdir -p "$OUT"
ngpu=$(nvidia-smi --query-gpu=index --format=csv,noheader 2>/dev/null | wc -l)
if [ "$ngpu" -lt 1 ]; then
	echo "no GPU: nvidia-smi lists none" | tee "$OUT/plan.txt"
	exit 2
fi
if [ -n "${COUNTS:-}" ]; then
	read -r -a counts <<<"$COUNTS"
else
	counts=()
	for n in 1 2 4 8; do [ "$n" -le "$ngpu" ] && counts+=("$n"); done
	case " ${counts[*]} " in *" $ngpu "*) ;; *) counts+=("$ngpu") ;; esac
fi

# ---- the plan (estimates, seconds) ----
setup_s=$((40 + 2 * ngpu))            # CUDA processes start, all on the GPUs
count_s=$((WARMUP + COST_SECONDS + 8)) # + stop, nvidia-smi timings
recv_s=35                              # receivercost.test: 40 scrapes at 500 ms
truth_s=$((TRUTH_SECONDS + 25))        # warm-up, stop, nvidia-smi
# On one GPU, the truths once more with the other load (TRUTH_SWAP=1).
TRUTH_SWAP=${TRUTH_SWAP:-$([ "$ngpu" -eq 1 ] && echo 1 || echo 0)}
swap_s=0
[ "$TRUTH_SWAP" = 1 ] && swap_s=$((truth_s + 25))
truth_s_all=$((truth_s + swap_s))
pack_s=15
wall_count_s=$((WARMUP + COST_SECONDS + 4))
cost_s=$((${#counts[@]} * count_s + recv_s))
wall_s=$((${#counts[@]} * wall_count_s))
all_part=$((setup_s + cost_s + wall_s + truth_s_all + pack_s))
call1=$((setup_s + cost_s + pack_s))
call2=$((setup_s + wall_s + truth_s_all + pack_s))
if [ "$PART" = auto ]; then
	if [ "$all_part" -le "$BUDGET_S" ]; then PART=all; else PART=cost; fi
fi
shown=$PART
[ "$PART" = all ] && PART=cost,wall,truth && shown="all ($PART)"
# has_part NAME: whether this call runs part NAME.
has_part() { case ",$PART," in *",$1,"*) return 0 ;; esac; return 1; }
{
	echo "GPUs: $ngpu; counts: ${counts[*]}; load order: $LOAD_ORDER; $HOLDERS holders x $HOLD_MIB MiB per GPU"
	echo "estimates: setup ${setup_s} s; per count: cost ${count_s} s, wall ${wall_count_s} s; receivercost ${recv_s} s; truth ${truth_s} s, swapped-load truth ${swap_s} s"
	echo "one call (PART=all): ~${all_part} s; or two: PART=cost ~${call1} s, then PART=wall,truth ~${call2} s"
	echo "budget ${BUDGET_S} s per call; this call: PART=$shown"
	[ "$PART" = cost ] && [ -z "${PLAN_ONLY:-}" ] &&
		echo "NEXT: run again with PART=wall,truth (then scale-compare.py DIR_CALL1 DIR_CALL2 merges the two)"
} | tee "$OUT/plan.txt"
[ -n "${PLAN_ONLY:-}" ] && exit 0
for p in ${PART//,/ }; do
	case "$p" in cost | wall | truth) ;; *)
		echo "PART must be auto, all, or a comma-separated list of cost, wall, truth (got $PART)" >&2
		exit 2
		;;
	esac
done

rm -rf "$RUN_DIR" && mkdir -p "$RUN_DIR"
cp "$OUT/plan.txt" "$RUN_DIR/plan.txt"
for f in "$CARRY"/*.gz; do [ -e "$f" ] && gunzip -f "$f"; done
chmod +x "$CARRY"/otelcol-nvml "$CARRY"/receivercost.test 2>/dev/null

pids=() # everything started here, stopped on the way out
# shellcheck disable=SC2317 # called by the trap
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
	wait 2>/dev/null
}
trap cleanup EXIT
note() { echo "$(date -u +%T) [$((SECONDS - T_START)) s] $*" | tee -a "$RUN_DIR/run.log"; }
# time_left NEED: whether a step of NEED seconds ends before DEADLINE_S.
time_left() { [ $((SECONDS - T_START + $1)) -le "$DEADLINE_S" ]; }

{
	date -u +%FT%TZ
	nvidia-smi --query-gpu=index,name,uuid,driver_version,memory.total,memory.used,mig.mode.current --format=csv
	uname -r
	nproc
	echo "processes on the GPUs before the run:"
	nvidia-smi --query-compute-apps=gpu_uuid,pid,process_name,used_memory --format=csv
	python3 -c 'import torch, cupy; print("torch", torch.__version__, "cupy", cupy.__version__)'
} >"$RUN_DIR/machine.txt" 2>&1
nvidia-smi --query-gpu=index,uuid --format=csv,noheader >"$RUN_DIR/uuids.csv"
echo "{\"gpus\": $ngpu, \"part\": \"$PART\", \"load_order\": \"$LOAD_ORDER\", \"holders\": $HOLDERS, \"hold_mib\": $HOLD_MIB}" >"$RUN_DIR/run.json"

# ---- the load: on each GPU its workload and $HOLDERS memory holders ----
# loads.txt: "index kind pid" (kind matmul, spin or holder).
: >"$RUN_DIR/loads.txt"
started=()
shift_by=0
[ "$LOAD_ORDER" = spin-first ] && shift_by=1
for ((i = 0; i < ngpu; i++)); do
	kind=matmul
	if [ $(((i + shift_by) % 2)) -eq 1 ]; then kind=spin; fi
	if [ "$kind" = matmul ]; then
		python3 "$here/workload.py" --device "$i" --gib 4 --duty 0.5 --seconds 900 >"$RUN_DIR/load$i-matmul.log" 2>&1 &
	else
		python3 "$here/spin.py" --device "$i" --seconds 900 >"$RUN_DIR/load$i-spin.log" 2>&1 &
	fi
	pids+=($!)
	started+=($!)
	echo "$i $kind $!" >>"$RUN_DIR/loads.txt"
	for ((h = 0; h < HOLDERS; h++)); do
		python3 "$here/scale-hold.py" --device "$i" --mib "$HOLD_MIB" --seconds 900 >"$RUN_DIR/load$i-hold$h.log" 2>&1 &
		pids+=($!)
		started+=($!)
		echo "$i holder $!" >>"$RUN_DIR/loads.txt"
	done
done
note "started ${#started[@]} CUDA processes on $ngpu GPUs"
# wait_on_gpus PID...: until each has a context on its GPU (120 s at most).
wait_on_gpus() {
	local deadline=$((SECONDS + 120)) on p missing dead
	while :; do
		on=$(nvidia-smi --query-compute-apps=pid --format=csv,noheader 2>/dev/null | tr -d ' ')
		missing=()
		for p in "$@"; do
			grep -qx "$p" <<<"$on" || missing+=("$p")
		done
		[ ${#missing[@]} -eq 0 ] && return 0
		dead=()
		for p in "${missing[@]}"; do kill -0 "$p" 2>/dev/null || dead+=("$p"); done
		if [ ${#dead[@]} -gt 0 ] || [ "$SECONDS" -ge "$deadline" ]; then
			note "WARNING: not on their GPU: ${missing[*]} (exited: ${dead[*]:-none}); the truths will say so"
			return 1
		fi
		sleep 1
	done
}
wait_on_gpus "${started[@]}"
sleep 5 # the matmuls' memory and cuBLAS; the windows fill
nvidia-smi --query-compute-apps=gpu_uuid,pid,process_name,used_memory --format=csv >"$RUN_DIR/apps-start.csv" 2>&1
note "load ready: $(($(wc -l <"$RUN_DIR/apps-start.csv") - 1)) compute processes"

# ---- PART cost: CPU, RSS and nvidia-smi per count, no traces ----
# collector_run MODE N: MODE cost (no traces: the CPU and RSS) or wall (its
# scrape spans to the sink: the wall time of each scrape).
collector_run() {
	local mode=$1 n=$2 devs sink_arg=()
	devs=$(seq -s, 0 $((n - 1)))
	[ "$mode" = wall ] && sink_arg=(--sink "127.0.0.1:$SINK_PORT")
	note "$mode n=$n: devices $devs"
	python3 "$here/scale-cost.py" collector --bin "$CARRY/otelcol-nvml" --devices "$devs" "${sink_arg[@]}" \
		--seconds "$COST_SECONDS" --warmup "$WARMUP" \
		--log "$RUN_DIR/collector-$mode-n$n.log" --out "$RUN_DIR/$mode-n$n.json" >>"$RUN_DIR/run.log" 2>&1 ||
		note "WARNING: the $mode collector run for n=$n failed (collector-$mode-n$n.log)"
	if [ "$mode" = cost ]; then
		python3 "$here/scale-cost.py" smi --gpus "$devs" --out "$RUN_DIR/smi-n$n.json" >>"$RUN_DIR/run.log" 2>&1 ||
			note "WARNING: nvidia-smi timing for n=$n failed"
	fi
}
if has_part cost; then
	for n in "${counts[@]}"; do
		if time_left "$count_s"; then
			collector_run cost "$n"
		else
			note "SKIPPED cost n=$n: no time left in this call (run again with PART=cost COUNTS=\"$n\")"
		fi
	done
	if time_left "$recv_s"; then
		note "receivercost.test (every GPU)"
		python3 "$here/scale-cost.py" receiver --build "$CARRY" --out "$RUN_DIR" >>"$RUN_DIR/run.log" 2>&1 ||
			note "WARNING: receivercost.test gave no COST line (receiver-all.txt)"
	else
		note "SKIPPED receivercost.test: no time left"
	fi
fi

# ---- PART wall: the scrape's wall time per count, from its spans ----
if has_part wall; then
	python3 "$here/scale-cost.py" sink-config --listen "127.0.0.1:$SINK_PORT" --path "$RUN_DIR/spans.jsonl" >"$RUN_DIR/sink.yaml"
	"$CARRY/otelcol-nvml" --config "$RUN_DIR/sink.yaml" >"$RUN_DIR/sink.log" 2>&1 &
	sink=$!
	pids+=("$sink")
	sleep 2
	for n in "${counts[@]}"; do
		if time_left "$wall_count_s"; then
			collector_run wall "$n"
		else
			note "SKIPPED wall n=$n: no time left in this call (run again with PART=wall COUNTS=\"$n\")"
		fi
	done
	sleep 2 # the collector flushes its spans on shutdown; let the sink write them
	kill "$sink" 2>/dev/null
	wait "$sink" 2>/dev/null
fi

# ---- PART truth ----
# truth_run TAG: one collector on every GPU for $TRUTH_SECONDS, with
# nvidia-smi's processes beside it; truth$TAG-*.
truth_run() {
	local tag=$1 tpid t0 t1 end ts
	note "truth$tag: every GPU, $TRUTH_SECONDS s"
	cat >"$RUN_DIR/truth$tag.yaml" <<EOF
receivers:
  nvml:
    collection_interval: 1s
exporters:
  file:
    path: $RUN_DIR/truth$tag-metrics.jsonl
service:
  telemetry:
    metrics:
      level: none
  pipelines:
    metrics:
      receivers: [nvml]
      exporters: [file]
EOF
	"$CARRY/otelcol-nvml" --config "$RUN_DIR/truth$tag.yaml" >"$RUN_DIR/truth$tag-collector.log" 2>&1 &
	tpid=$!
	pids+=("$tpid")
	sleep 5
	t0=$(date +%s%N)
	: >"$RUN_DIR/truth$tag-apps.csv"
	end=$((SECONDS + TRUTH_SECONDS))
	while [ "$SECONDS" -lt "$end" ]; do
		ts=$(date +%s%N)
		nvidia-smi --query-compute-apps=gpu_uuid,pid,used_memory --format=csv,noheader,nounits 2>/dev/null |
			sed "s/^/$ts, /" >>"$RUN_DIR/truth$tag-apps.csv"
		sleep 5
	done
	t1=$(date +%s%N)
	echo "$t0 $t1" >"$RUN_DIR/truth$tag-window.txt"
	kill -TERM "$tpid"
	for _ in $(seq 1 30); do kill -0 "$tpid" 2>/dev/null || break; sleep 0.5; done
	kill -0 "$tpid" 2>/dev/null && note "WARNING: the truth$tag collector did not stop in 15 s; killed" && kill -KILL "$tpid"
	wait "$tpid"
	echo "collector exit: $?" >>"$RUN_DIR/truth$tag-collector.log"
}
if has_part truth; then
	if time_left "$truth_s"; then
		cp "$RUN_DIR/loads.txt" "$RUN_DIR/truth-loads.txt"
		truth_run ""
	else
		note "SKIPPED truth: no time left (run again with PART=truth)"
	fi
	# One GPU has only one of the two loads: swap it for the other (the
	# holders stay) and check the truths again, so that both are seen.
	if [ "$TRUTH_SWAP" = 1 ]; then
		if time_left "$swap_s"; then
			: >"$RUN_DIR/truth-swap-loads.txt"
			swapped=()
			while read -r i kind pid; do
				if [ "$kind" = holder ]; then
					echo "$i $kind $pid" >>"$RUN_DIR/truth-swap-loads.txt"
					continue
				fi
				kill "$pid" 2>/dev/null
				wait "$pid" 2>/dev/null
				if [ "$kind" = matmul ]; then
					python3 "$here/spin.py" --device "$i" --seconds 900 >"$RUN_DIR/load$i-swap-spin.log" 2>&1 &
					kind=spin
				else
					python3 "$here/workload.py" --device "$i" --gib 4 --duty 0.5 --seconds 900 >"$RUN_DIR/load$i-swap-matmul.log" 2>&1 &
					kind=matmul
				fi
				pids+=($!)
				swapped+=($!)
				echo "$i $kind $!" >>"$RUN_DIR/truth-swap-loads.txt"
			done <"$RUN_DIR/loads.txt"
			note "swapped the loads: ${swapped[*]}"
			wait_on_gpus "${swapped[@]}"
			sleep 5
			truth_run -swap
		else
			note "SKIPPED the swapped-load truth: no time left"
		fi
	fi
fi

cleanup
trap - EXIT
grep -hiE $'\t(warn|error)\t' "$RUN_DIR"/collector-*.log "$RUN_DIR"/truth*-collector.log 2>/dev/null | head -40 >"$RUN_DIR/collector-warnings.txt"
python3 "$here/scale-compare.py" --out "$RUN_DIR" "$RUN_DIR" | tee "$RUN_DIR/compare.txt"
rc=${PIPESTATUS[0]}
cp "$RUN_DIR/scale.md" "$RUN_DIR/scale.json" "$OUT/" 2>/dev/null
tar czf "$OUT/h200scale.tgz" -C "$(dirname "$RUN_DIR")" "$(basename "$RUN_DIR")"
note "done in $((SECONDS - T_START)) s"
exit "$rc"
