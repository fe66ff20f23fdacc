#!/usr/bin/env bash
# Runs on the lent H200 machine, from the repository root, with the binaries
# built here (make h200-bundle) in .carry/. Leaves report.txt and a tarball
# of every reading under $OUT.
# It changes no GPU setting: it only reads, and runs a PyTorch workload.
set -u
: "${OUT:?set OUT to a folder for the results}"
mkdir -p "$OUT"
CARRY=.carry
export RUN_DIR=/tmp/h200run
rm -rf "$RUN_DIR" && mkdir -p "$RUN_DIR"
for f in "$CARRY"/*.gz; do [ -e "$f" ] && gunzip -f "$f"; done
chmod +x "$CARRY"/otelcol-nvml "$CARRY"/scrapecost
{
	date -u +%FT%TZ
	nvidia-smi --query-gpu=index,name,uuid,driver_version,memory.total --format=csv
	uname -r
} >"$RUN_DIR/machine.txt" 2>&1
nvidia-smi --query-gpu=uuid --format=csv,noheader >"$RUN_DIR/uuids.txt"
ngpu=$(wc -l <"$RUN_DIR/uuids.txt")

# A steady load on every GPU: 8 GiB held, 50 % duty bf16 matmuls.
wpids=()
for ((i = 0; i < ngpu; i++)); do
	python3 tools/h200/workload.py --device "$i" --gib 8 --seconds 75 >"$RUN_DIR/workload$i.log" 2>&1 &
	wpids+=($!)
done
sleep 12 # let CUDA contexts and memory settle
# What the kernel says of each workload process, for process.executable.name
# (the base name of /proc/<pid>/exe, not comm) and process.creation.time.
for pid in "${wpids[@]}"; do
	printf '%s %s %s %s\n' "$pid" "$(basename "$(readlink "/proc/$pid/exe")")" "$(cat "/proc/$pid/comm")" \
		"$(date -u -d "@$(($(awk '/^btime/ {print $2}' /proc/stat) + $(awk '{print $22}' "/proc/$pid/stat") / $(getconf CLK_TCK)))" +%FT%TZ)"
done >"$RUN_DIR/processes.txt"
# The static limits, once, under load (an idle link may train down below its
# max): pcie.link.gen.max and width.max are NVML's nvmlDeviceGetMaxPcieLinkGeneration
# and Width (what the GPU and the system allow; gen.gpumax is the GPU alone,
# gen.hostmax the root port alone). gen.gpucurrent replaces the deprecated
# gen.current; the second query is for a driver whose nvidia-smi lacks it.
limits=uuid,clocks.max.sm,clocks.max.memory,pcie.link.gen.max,pcie.link.width.max
nvidia-smi --query-gpu="$limits",pcie.link.gen.gpucurrent,pcie.link.width.current \
	--format=csv,noheader,nounits >"$RUN_DIR/limits.csv" 2>"$RUN_DIR/limits.err" ||
	nvidia-smi --query-gpu="$limits",pcie.link.gen.current,pcie.link.width.current \
		--format=csv,noheader,nounits >"$RUN_DIR/limits.csv" 2>>"$RUN_DIR/limits.err"

"$CARRY/otelcol-nvml" --config testdata/collector/h200-check.yaml >"$RUN_DIR/collector.log" 2>&1 &
cpid=$!
for _ in $(seq 1 32); do
	nvidia-smi --query-gpu=timestamp,uuid,memory.used,power.draw,utilization.gpu,temperature.gpu,temperature.memory \
		--format=csv,noheader,nounits >>"$RUN_DIR/smi.csv"
	sleep 1
done
python3 - >"$RUN_DIR/prometheus.txt" 2>&1 <<'PY'
import urllib.request
body = urllib.request.urlopen("http://127.0.0.1:18889/metrics", timeout=5).read().decode()
print("\n".join(l for l in body.splitlines() if l.startswith(("# TYPE", "hw_gpu_memory_usage", "hw_power", "hw_gpu_utilization", "hw_temperature"))))
PY
kill -TERM "$cpid"
wait "$cpid"
echo "collector exit: $?" >>"$RUN_DIR/collector.log"

# Scrape cost under load, then idle, as root and as an unprivileged user.
"$CARRY/scrapecost" -test.run '^TestScrapeCost$' -rounds 200 -out "$RUN_DIR/scrapecost-load.json" >>"$RUN_DIR/scrapecost.log" 2>&1
kill "${wpids[@]}" 2>/dev/null
wait "${wpids[@]}" 2>/dev/null
sleep 3
"$CARRY/scrapecost" -test.run '^TestScrapeCost$' -rounds 200 -out "$RUN_DIR/scrapecost-idle.json" >>"$RUN_DIR/scrapecost.log" 2>&1
if command -v setpriv >/dev/null; then
	install -m 666 /dev/null "$RUN_DIR/scrapecost-nobody.json" # the probe, as nobody, writes it
	setpriv --reuid=65534 --regid=65534 --clear-groups "$CARRY/scrapecost" -test.run '^TestScrapeCost$' -rounds 20 -out "$RUN_DIR/scrapecost-nobody.json" >>"$RUN_DIR/scrapecost.log" 2>&1
fi

python3 tools/h200/compare.py "$RUN_DIR/metrics.jsonl" "$RUN_DIR/smi.csv" "$RUN_DIR/uuids.txt" \
	"$RUN_DIR/processes.txt" "$RUN_DIR/prometheus.txt" "$RUN_DIR/limits.csv" | tee "$RUN_DIR/report.txt"
cp "$RUN_DIR/report.txt" "$OUT/report.txt"
tar czf "$OUT/h200run.tgz" -C /tmp h200run
