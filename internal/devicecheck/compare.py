"""Compares what otelcol-nvml exported (file exporter, OTLP JSON lines)
with nvidia-smi's readings taken over the same seconds. Prints a report and
exits non-zero when a GPU is missing or memory or power disagree."""
import csv
import json
import statistics
import sys
from datetime import datetime

metrics_path, smi_path, uuids_path = sys.argv[1:4]

# receiver points: uuid -> metric -> [(t, value)]
recv = {}
for line in open(metrics_path):
    line = line.strip()
    if not line:
        continue
    for rm in json.loads(line).get("resourceMetrics", []):
        attrs = {a["key"]: list(a["value"].values())[0] for a in rm["resource"].get("attributes", [])}
        uuid = attrs.get("hw.id")
        for sm in rm.get("scopeMetrics", []):
            for m in sm.get("metrics", []):
                body = m.get("gauge") or m.get("sum") or {}
                for dp in body.get("dataPoints", []):
                    v = dp.get("asDouble", dp.get("asInt"))
                    key = m["name"]
                    for a in dp.get("attributes", []):
                        key += "{%s=%s}" % (a["key"], list(a["value"].values())[0])
                    recv.setdefault(uuid, {}).setdefault(key, []).append(
                        (int(dp["timeUnixNano"]) / 1e9, float(v)))

smi = {}
for row in csv.reader(open(smi_path)):
    if len(row) < 5:
        continue
    ts, uuid, mem, power, util = [c.strip() for c in row[:5]]
    t = datetime.strptime(ts, "%Y/%m/%d %H:%M:%S.%f").timestamp()
    smi.setdefault(uuid, []).append((t, float(mem), float(power), float(util)))

want = [l.strip() for l in open(uuids_path) if l.strip()]
ok = True
print("GPUs from nvidia-smi:", len(want), " resources from otelcol-nvml:", len(recv))
for uuid in want:
    print("\n==", uuid)
    if uuid not in recv:
        print("  MISSING from the receiver's output")
        ok = False
        continue
    series = recv[uuid]
    print("  metrics:", ", ".join(sorted(series)))
    s = smi.get(uuid, [])

    def nearest(t):
        return min(s, key=lambda r: abs(r[0] - t))

    mem_diff, pow_diff, util_pairs = [], [], []
    for t, v in series.get("hw.gpu.memory.usage", []):
        n = nearest(t)
        mem_diff.append(abs(v / 2**20 - n[1]))
    for t, v in series.get("hw.power", []):
        n = nearest(t)
        pow_diff.append((abs(v - n[2]), n[2]))
    for t, v in series.get("hw.gpu.utilization{hw.gpu.task=general}", []):
        util_pairs.append((round(100 * v, 1), nearest(t)[3]))
    if not mem_diff or not pow_diff:
        print("  no memory or power points")
        ok = False
        continue
    mem_med = statistics.median(mem_diff)
    pow_med = statistics.median(d for d, _ in pow_diff)
    pow_ref = statistics.median(r for _, r in pow_diff)
    mem_ok = mem_med <= 2.0  # MiB: both read the same NVML counter
    pow_ok = pow_med <= max(15.0, 0.10 * pow_ref)  # power moves between the two reads
    ok = ok and mem_ok and pow_ok
    used = [v / 2**20 for _, v in series["hw.gpu.memory.usage"]]
    print("  memory used: receiver median %.0f MiB, median |diff| to nvidia-smi %.1f MiB -> %s"
          % (statistics.median(used), mem_med, "MATCH" if mem_ok else "MISMATCH"))
    print("  power: nvidia-smi median %.1f W, median |diff| %.1f W -> %s"
          % (pow_ref, pow_med, "MATCH" if pow_ok else "MISMATCH"))
    print("  utilization (receiver windowed %, nvidia-smi instant %):", util_pairs[:12])
    energy = [v for _, v in series.get("hw.energy", [])]
    if energy:
        mono = all(b >= a for a, b in zip(energy, energy[1:]))
        print("  energy: %.1f J over the run, monotonic: %s" % (energy[-1] - energy[0], mono))
        ok = ok and mono

print("\nRESULT:", "PASS" if ok else "FAIL")
sys.exit(0 if ok else 1)
