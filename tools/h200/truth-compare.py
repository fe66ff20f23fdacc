"""Checks the known-truth run: GPU 0 (one spinning block) must read ~100 %
utilization but under 2 % GPM SM activity; GPU 1 (50 %-duty matmul) must
read 40-55 % for both; the workload's process resource must carry the
container id and pod uid of its cgroup, and its windowed SM utilization must
agree with its GPU's within 5 points, and its process.executable.name must
be the base name of its /proc/<pid>/exe (argument 5), not its comm."""
import json
import statistics
import sys

metrics_path, wpid, container_id, pod_uid = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
exe_name = sys.argv[5] if len(sys.argv) > 5 else None

gpu = {}    # index -> name -> [(t, v)]
procs = {}  # (index, pid) -> {"attrs":..., name -> [(t, v)]}
for line in open(metrics_path):
    if not line.strip():
        continue
    for rm in json.loads(line).get("resourceMetrics", []):
        attrs = {a["key"]: list(a["value"].values())[0] for a in rm["resource"].get("attributes", [])}
        idx = int(attrs.get("nvidia.gpu.index", -1))
        pid = attrs.get("process.pid")
        if pid is not None:
            target = procs.setdefault((idx, int(pid)), {"attrs": attrs})
        else:
            target = gpu.setdefault(idx, {})
        for sm in rm.get("scopeMetrics", []):
            for m in sm.get("metrics", []):
                body = m.get("gauge") or m.get("sum") or {}
                for dp in body.get("dataPoints", []):
                    key = m["name"]
                    for a in dp.get("attributes", []):
                        key += "{%s}" % list(a["value"].values())[0]
                    v = float(dp.get("asDouble", dp.get("asInt")))
                    target.setdefault(key, []).append((int(dp["timeUnixNano"]), v))

def med(series):
    vals = [v for _, v in series]
    return statistics.median(vals) if vals else float("nan")

ok = True
def check(name, cond, detail):
    global ok
    ok = ok and cond
    print("%-60s %s  (%s)" % (name, "OK" if cond else "FAIL", detail))

for idx in sorted(gpu):
    g = gpu[idx]
    print("GPU %d: util %.3f  sm.activity %.4f  sm.occupancy %.4f  tensor %.4f  dram %.4f  pcie tx %s B" % (
        idx, med(g.get("hw.gpu.utilization{general}", [])), med(g.get("nvidia.gpu.sm.activity", [])),
        med(g.get("nvidia.gpu.sm.occupancy", [])), med(g.get("nvidia.gpu.tensor.activity", [])),
        med(g.get("nvidia.gpu.memory.bandwidth.utilization", [])),
        g.get("hw.gpu.io{transmit}", [(0, "?")])[-1][1]))
    print("   util series:", [round(v, 3) for _, v in g.get("hw.gpu.utilization{general}", [])])
    print("   sm.activity series:", [round(v, 4) for _, v in g.get("nvidia.gpu.sm.activity", [])])

g0, g1 = gpu.get(0, {}), gpu.get(1, {})
check("spin GPU: utilization ~100 %", med(g0.get("hw.gpu.utilization{general}", [])) > 0.9,
      "median %.3f" % med(g0.get("hw.gpu.utilization{general}", [])))
check("spin GPU: GPM SM activity under 2 %", med(g0.get("nvidia.gpu.sm.activity", [])) < 0.02,
      "median %.4f" % med(g0.get("nvidia.gpu.sm.activity", [])))
check("50 % duty GPU: utilization 40-55 %", 0.40 <= med(g1.get("hw.gpu.utilization{general}", [])) <= 0.55,
      "median %.3f" % med(g1.get("hw.gpu.utilization{general}", [])))
check("50 % duty GPU: windowed utilization within 3 points of the duty cycle",
      abs(med(g1.get("hw.gpu.utilization{general}", [])) - 0.50) <= 0.03,
      "median %.3f" % med(g1.get("hw.gpu.utilization{general}", [])))
check("50 % duty GPU: GPM SM activity 35-55 %", 0.35 <= med(g1.get("nvidia.gpu.sm.activity", [])) <= 0.55,
      "median %.3f" % med(g1.get("nvidia.gpu.sm.activity", [])))

p = procs.get((1, wpid))
check("workload process reported on GPU 1", p is not None, "pid %d; processes seen: %s" % (wpid, sorted(procs)))
if p:
    a = p["attrs"]
    print("   process resource:", {k: v for k, v in a.items() if k.startswith(("process.", "container.", "k8s."))})
    check("process container.id from its cgroup", a.get("container.id") == container_id, a.get("container.id"))
    check("process k8s.pod.uid from its cgroup", a.get("k8s.pod.uid") == pod_uid, a.get("k8s.pod.uid"))
    if exe_name:
        check("process.executable.name is the exe's base name", a.get("process.executable.name") == exe_name,
              "%s, /proc exe %s" % (a.get("process.executable.name"), exe_name))
    check("process.creation.time present", bool(a.get("process.creation.time")), a.get("process.creation.time"))
    psm = dict(p.get("nvidia.gpu.process.utilization{general}", []))
    gu = dict(g1.get("hw.gpu.utilization{general}", []))
    pairs = [(psm[t], gu[t]) for t in psm if t in gu]
    diffs = [abs(a_ - b_) for a_, b_ in pairs]
    print("   (process sm, gpu util) pairs:", [(round(x, 3), round(y, 3)) for x, y in pairs])
    check("process SM util within 5 points of GPU util", bool(diffs) and statistics.median(diffs) <= 0.05,
          "median |diff| %.3f over %d scrapes" % (statistics.median(diffs) if diffs else float("nan"), len(diffs)))
print("\nRESULT:", "PASS" if ok else "FAIL")
sys.exit(0 if ok else 1)
