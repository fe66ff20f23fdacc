"""Compares what otelcol-nvml exported (file exporter, OTLP JSON lines)
with nvidia-smi's readings taken over the same seconds, and with what /proc
said of the workload processes. Prints a report and exits non-zero when a
GPU is missing, memory, power or a temperature disagree, a workload process
is named other than its executable, or a Prometheus name ends in _ratio
without being a ratio, or a GPU's static limits (max SM and memory clocks,
max PCIe generation and width) differ from nvidia-smi's.

Usage: compare.py metrics.jsonl smi.csv uuids.txt [processes.txt [prometheus.txt [limits.csv]]]
smi.csv: timestamp, uuid, memory.used, power.draw, utilization.gpu,
temperature.gpu, temperature.memory (nounits; N/A where unsupported).
processes.txt: "pid exe-basename comm creation-time" per workload process.
limits.csv: uuid, clocks.max.sm, clocks.max.memory, pcie.link.gen.max,
pcie.link.width.max, pcie.link.gen.gpucurrent, pcie.link.width.current
(noheader, nounits), one nvidia-smi query taken under load. Each limit check
prints PASS, FAIL or SKIP (nvidia-smi answers [N/A] / [Not Supported])."""
import csv
import json
import statistics
import sys
from datetime import datetime


def lines(path):
    """The lines of a file, read and closed."""
    with open(path) as f:
        return f.read().splitlines()


def number(cell):
    """A reading, or None where nvidia-smi says N/A ([N/A], [Not Supported])."""
    try:
        return float(cell)
    except ValueError:
        return None


# The static limits: nvidia.gpu.clock.max_frequency (nvmlDeviceGetMaxClockInfo
# SM / MEM), nvidia.gpu.pcie.link.max_generation and max_width
# (nvmlDeviceGetMaxPcieLinkGeneration / Width), against one nvidia-smi query.
# limits.csv columns, in the order h200-run.sh asks for them.
LIMIT_FIELDS = ("uuid", "clocks.max.sm", "clocks.max.memory", "pcie.link.gen.max", "pcie.link.width.max",
                "pcie.link.gen.gpucurrent", "pcie.link.width.current")
MAX_CLOCK = "nvidia.gpu.clock.max_frequency"
MAX_GEN = "nvidia.gpu.pcie.link.max_generation"
MAX_WIDTH = "nvidia.gpu.pcie.link.max_width"
CUR_GEN = "nvidia.gpu.pcie.link.generation"
CUR_WIDTH = "nvidia.gpu.pcie.link.width"


def read_limits(path):
    """uuid -> {field: the cell as nvidia-smi wrote it}, from limits.csv."""
    rows = {}
    try:
        text = lines(path)
    except OSError:
        return rows  # no query at all: every GPU fails for want of its row
    for row in csv.reader(text):
        cells = [c.strip() for c in row]
        if len(cells) < len(LIMIT_FIELDS) or not cells[0].startswith(("GPU-", "MIG-")):
            continue  # an error line, or a short one
        rows[cells[0]] = dict(zip(LIMIT_FIELDS[1:], cells[1:len(LIMIT_FIELDS)]))
    return rows


def smi_int(cell):
    """(an integer, None) from a nounits cell, or (None, why) where nvidia-smi
    has no number: [N/A], [Not Supported], an error in brackets."""
    try:
        return int(cell), None
    except (TypeError, ValueError):
        pass
    try:
        f = float(cell)
        if f == int(f):
            return int(f), None
    except (TypeError, ValueError, OverflowError):
        pass
    return None, "nvidia-smi answers %r" % (cell,)


def check_limits(series, row):
    """The limit checks of one GPU: series is the GPU's receiver points
    (metric key -> [(t, value)]), row its limits.csv row (None when nvidia-smi
    gave none). Returns [(status, line)], status PASS, FAIL or SKIP."""
    out = []
    if row is None:
        return [("FAIL", "limits: no nvidia-smi row for this GPU in limits.csv")]

    def values(key):
        return sorted({v for _, v in series.get(key, [])})

    def equal(key, field, scale, unit):
        want, why = smi_int(row.get(field))
        got = values(key)
        if want is None:
            out.append(("SKIP", "%s: %s, %s (receiver: %s)"
                        % (key, field, why, ", ".join("%.0f" % v for v in got) or "no points")))
            return
        want *= scale
        if not got:
            out.append(("FAIL", "%s: absent from metrics.jsonl; nvidia-smi %s reads %d %s" % (key, field, want, unit)))
        elif got != [want]:
            out.append(("FAIL", "%s: receiver %s %s, nvidia-smi %s %d %s"
                        % (key, ", ".join("%.0f" % v for v in got), unit, field, want, unit)))
        else:
            out.append(("PASS", "%s = %d %s = nvidia-smi %s" % (key, want, unit, field)))

    def at_least(key, cur_key, field, unit):
        cur, why = smi_int(row.get(field))
        got = values(key)
        if cur is None:
            out.append(("SKIP", "%s >= current: %s, %s" % (key, field, why)))
            return
        if not got:
            out.append(("FAIL", "%s >= current: %s absent from metrics.jsonl (nvidia-smi %s %d)" % (key, key, field, cur)))
            return
        # The receiver's own current readings, where it exports them, too.
        currents = [cur] + values(cur_key)
        ok = min(got) >= max(currents)
        out.append(("PASS" if ok else "FAIL", "%s %s %s >= current: nvidia-smi %s %d, receiver %s %s"
                    % (key, "/".join("%.0f" % v for v in got), unit, field, cur, cur_key,
                       "/".join("%.0f" % v for v in values(cur_key)) or "no points")))

    # nounits: clocks in MHz, the receiver in Hz; exactly MHz x 1e6.
    equal(MAX_CLOCK + "{nvidia.gpu.clock.type=sm}", "clocks.max.sm", 1_000_000, "Hz")
    equal(MAX_CLOCK + "{nvidia.gpu.clock.type=memory}", "clocks.max.memory", 1_000_000, "Hz")
    equal(MAX_GEN, "pcie.link.gen.max", 1, "{generation}")
    equal(MAX_WIDTH, "pcie.link.width.max", 1, "{lane}")
    at_least(MAX_GEN, CUR_GEN, "pcie.link.gen.gpucurrent", "{generation}")
    at_least(MAX_WIDTH, CUR_WIDTH, "pcie.link.width.current", "{lane}")
    return out


def main():
    metrics_path, smi_path, uuids_path = sys.argv[1:4]
    procs_path = sys.argv[4] if len(sys.argv) > 4 else None
    prom_path = sys.argv[5] if len(sys.argv) > 5 else None
    limits_path = sys.argv[6] if len(sys.argv) > 6 else None
    limits = read_limits(limits_path) if limits_path else {}

    # receiver points: uuid -> metric -> [(t, value)]
    recv = {}
    # process resources: pid -> {"exe": set(), "created": set()}
    proc_attrs = {}
    # OTLP names of ratios (gauges of unit 1), for the _ratio check
    ratios = set()
    for line in lines(metrics_path):
        line = line.strip()
        if not line:
            continue
        for rm in json.loads(line).get("resourceMetrics", []):
            attrs = {a["key"]: list(a["value"].values())[0] for a in rm["resource"].get("attributes", [])}
            uuid = attrs.get("hw.id")
            if "process.pid" in attrs:
                pa = proc_attrs.setdefault(int(attrs["process.pid"]), {"exe": set(), "created": set()})
                pa["exe"].add(attrs.get("process.executable.name"))
                pa["created"].add(attrs.get("process.creation.time"))
            for sm in rm.get("scopeMetrics", []):
                for m in sm.get("metrics", []):
                    if "gauge" in m and m.get("unit") == "1":
                        ratios.add(m["name"])
                    body = m.get("gauge") or m.get("sum") or {}
                    for dp in body.get("dataPoints", []):
                        v = dp.get("asDouble", dp.get("asInt"))
                        key = m["name"]
                        for a in dp.get("attributes", []):
                            key += "{%s=%s}" % (a["key"], list(a["value"].values())[0])
                        recv.setdefault(uuid, {}).setdefault(key, []).append(
                            (int(dp["timeUnixNano"]) / 1e9, float(v)))

    smi = {}
    for row in csv.reader(lines(smi_path)):
        if len(row) < 7:
            continue
        ts, uuid, mem, power, util, temp, mem_temp = [c.strip() for c in row[:7]]
        t = datetime.strptime(ts, "%Y/%m/%d %H:%M:%S.%f").timestamp()
        smi.setdefault(uuid, []).append((t, float(mem), float(power), float(util), number(temp), number(mem_temp)))

    want = [l.strip() for l in lines(uuids_path) if l.strip()]
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
        if limits_path:
            for status, text in check_limits(series, limits.get(uuid)):
                print("  %s %s" % (status, text))
                ok = ok and status != "FAIL"
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
        # Temperatures: the die (temperature.gpu) and the HBM (temperature.memory,
        # FI_DEV_MEMORY_TEMP); whole degrees on both sides, read up to a second
        # apart.
        for loc, col, smi_name in (("gpu", 4, "temperature.gpu"), ("memory", 5, "temperature.memory")):
            pts = series.get("hw.temperature{hw.sensor_location=%s}" % loc, [])
            refs = [r[col] for r in s if r[col] is not None]
            if not refs:
                t_ok = not pts
                print("  hw.temperature{%s}: nvidia-smi %s N/A; receiver points: %d -> %s"
                      % (loc, smi_name, len(pts), "MATCH" if t_ok else "MISMATCH (the receiver reports what nvidia-smi cannot)"))
            elif not pts:
                t_ok = False
                print("  hw.temperature{%s}: no points, nvidia-smi %s reads %.0f C -> MISMATCH" % (loc, smi_name, statistics.median(refs)))
            else:
                diffs = [abs(v - nearest(t)[col]) for t, v in pts if nearest(t)[col] is not None]
                t_ok = bool(diffs) and statistics.median(diffs) <= 2.0
                print("  hw.temperature{%s}: receiver median %.1f C, nvidia-smi %s median %.1f C, median |diff| %.1f C -> %s"
                      % (loc, statistics.median(v for _, v in pts), smi_name, statistics.median(refs),
                         statistics.median(diffs) if diffs else float("nan"), "MATCH" if t_ok else "MISMATCH"))
            ok = ok and t_ok
        energy = [v for _, v in series.get("hw.energy", [])]
        if energy:
            mono = all(b >= a for a, b in zip(energy, energy[1:]))
            print("  energy: %.1f J over the run, monotonic: %s" % (energy[-1] - energy[0], mono))
            ok = ok and mono

    if procs_path:
        # Each workload process: process.executable.name is the base name of
        # /proc/<pid>/exe (python3.12, not comm), and process.creation.time its
        # start (the shell's reading has whole seconds).
        print("\n== processes")
        for line in lines(procs_path):
            f = line.split()
            if len(f) < 4:
                continue
            pid, exe, comm, created = int(f[0]), f[1], f[2], f[3]
            pa = proc_attrs.get(pid)
            if pa is None:
                print("  pid %d (%s): MISSING from the receiver's process resources" % (pid, exe))
                ok = False
                continue
            names, times = pa["exe"] - {None}, pa["created"] - {None}
            name_ok = names == {exe}
            t_ok = len(times) == 1
            if t_ok:
                got = datetime.fromisoformat(next(iter(times)).replace("Z", "+00:00")).timestamp()
                want = datetime.fromisoformat(created.replace("Z", "+00:00")).timestamp()
                t_ok = abs(got - want) <= 1.5
            print("  pid %d: process.executable.name %s, /proc exe %s (comm %s) -> %s; process.creation.time %s, /proc %s -> %s"
                  % (pid, sorted(names), exe, comm, "MATCH" if name_ok else "MISMATCH", sorted(times), created,
                     "MATCH" if t_ok else "MISMATCH"))
            ok = ok and name_ok and t_ok

    if prom_path:
        # On the Prometheus endpoint, _ratio only on ratios.
        print("\n== Prometheus names")
        families = [l.split()[2] for l in lines(prom_path) if l.startswith("# TYPE ")]
        ours = [f for f in families if f.startswith(("hw_", "nvidia_"))]
        bad = [f for f in ours if f.endswith("_ratio") and f[:-len("_ratio")] not in {r.replace(".", "_") for r in ratios}]
        print("  %d families; ending in _ratio without being a ratio: %s -> %s"
              % (len(ours), bad or "none", "MATCH" if not bad else "MISMATCH"))
        ok = ok and not bad and bool(ours)

    print("\nRESULT:", "PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
