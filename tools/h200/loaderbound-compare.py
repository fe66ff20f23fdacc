"""Reads otelcol-nvml's file-exporter output from loaderbound-run.sh and
says whether each container reads as it should: the input-bound one with its
CPU near its limit and its GPU underused, the GPU-bound one with its GPU busy
and CPU to spare. Exit status 1 when either does not match."""
import json
import sys

path, cpu_bound, gpu_bound = sys.argv[1:4]


def attrs(kvs):
    return {kv["key"]: list(kv["value"].values())[0] for kv in kvs}


cpu = {}    # container id -> [(t, seconds)]
limit = {}  # container id -> cores
util = {}   # container id -> [utilization]
for line in open(path):
    for rm in json.loads(line).get("resourceMetrics", []):
        res = attrs(rm["resource"].get("attributes", []))
        ctr = res.get("container.id")
        for sm in rm["scopeMetrics"]:
            for m in sm["metrics"]:
                dps = (m.get("sum") or m.get("gauge") or {}).get("dataPoints", [])
                for dp in dps:
                    v = dp.get("asDouble", dp.get("asInt"))
                    t = int(dp["timeUnixNano"]) / 1e9
                    if m["name"] == "container.cpu.time" and ctr:
                        cpu.setdefault(ctr, []).append((t, float(v)))
                    elif m["name"] == "nvidia.gpu.container.cpu.limit" and ctr:
                        limit[ctr] = float(v)
                    elif m["name"] == "hw.gpu.utilization" and ctr and "process.pid" not in res \
                            and attrs(dp.get("attributes", [])).get("hw.gpu.task") == "general":
                        util.setdefault(ctr, []).append(float(v))

ok = True
for name, ctr in (("input-bound", cpu_bound), ("GPU-bound", gpu_bound)):
    pts = sorted(cpu.get(ctr, []))
    if len(pts) < 2 or ctr not in limit or not util.get(ctr):
        print(f"{name} {ctr[:12]}: missing data (cpu {len(pts)}, limit {ctr in limit}, util {len(util.get(ctr, []))}): DID NOT MATCH")
        ok = False
        continue
    rate = (pts[-1][1] - pts[0][1]) / (pts[-1][0] - pts[0][0])
    frac = rate / limit[ctr]
    u = sum(util[ctr]) / len(util[ctr])
    want = frac > 0.8 and u < 0.6 if name == "input-bound" else u > 0.9 and frac < 0.5
    ok &= want
    print(f"{name} {ctr[:12]}: CPU {rate:.2f} of {limit[ctr]:.2f} cores ({frac:.0%}), GPU utilization {u:.0%}: "
          f"{'MATCH' if want else 'DID NOT MATCH'}")
sys.exit(0 if ok else 1)
