//go:build e2e

package e2e

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/otelcol-nvml/otelcol-nvml/test/testutil"
)

const scopeName = "github.com/otelcol-nvml/otelcol-nvml/receiver/nvmlreceiver"

// The receiver settings of the collectors under test: a 1 s interval, and a
// scrape timeout well under it, so that a hung GPU shows.
const receiverSettings = `collection_interval: 1s
initial_delay: 500ms
timeout: 500ms
counter_interval: 2s
`

// gpuSpec is one GPU of the pipeline scenario and what the receiver must
// report for it. Times are scenario seconds (t = 0 at the first nvmlInit).
type gpuSpec struct {
	uuid, name, serial, pci   string
	general, memUtil          float64 // busy fractions of the duty patterns
	generalPeriod, memPeriod  float64
	encoder                   float64 // -1: none
	used, total, reserved     uint64
	temp, tempAfter, tempStep float64   // tempAfter from tempStep on; tempStep 0: constant
	memTemp                   float64   // FI_DEV_MEMORY_TEMP; 0: NOT_SUPPORTED
	margin                    Signal    // nvmlDeviceGetMarginTemperature; nil: NOT_SUPPORTED
	ber                       Signal    // FI_DEV_NVLINK_COUNT_EFFECTIVE_BER, packed; nil: NOT_SUPPORTED
	pcieKiBs                  [2]Signal // nvmlDeviceGetPcieThroughput TX, RX; nil: NOT_SUPPORTED
	power                     float64
	powerNotSupported         bool
	powerLimit                float64
	energyOffset              float64
	fan                       float64 // percent; -1: none
	clocks                    map[string]float64
	pstate                    float64
	lostAt, hangFrom, hangFor float64 // 0: none
	processes                 []Process
	gpm                       map[string]Signal
	// Health: a nil map or signal leaves the key out of the scenario (the
	// calls then answer NOT_SUPPORTED).
	ecc, remapped, violation, pcie map[string]Signal
	clockEvents                    Signal // nvmlDeviceGetCurrentClocksEventReasons bits
	// nvlink: the NVLink error counters by nvidia.gpu.nvlink.error.type,
	// served as field values by id; nil: no NVLink (NOT_SUPPORTED).
	nvlink map[string]Signal
	events []Event
}

// nvlinkFields are the NVML field ids of the NVLink error counters.
var nvlinkFields = map[string]string{"crc_flit": "38", "crc_data": "45", "replay": "52", "recovery": "59", "symbol": "221"}

// Process IDs above the kernel's PID_MAX_LIMIT (2^22): never a real process,
// so the receiver finds none of them in /proc and adds no owner.
const fakePID = 1<<22 + 100

// gpm0 is GPU 0's GPM: percentages, and MiB/s for the *_PER_SEC rates.
var gpm0 = map[string]Signal{
	"SM_UTIL": 40, "SM_OCCUPANCY": 25, "GRAPHICS_UTIL": 45, "ANY_TENSOR_UTIL": 30, "DRAM_BW_UTIL": 20,
	"HMMA_TENSOR_UTIL": 30, "IMMA_TENSOR_UTIL": 0, "DMMA_TENSOR_UTIL": 0, "DFMA_TENSOR_UTIL": 0,
	"FP64_UTIL": 0, "FP32_UTIL": 10, "FP16_UTIL": 20, "INTEGER_UTIL": 5,
	"PCIE_TX_PER_SEC": Steps{Steps: [][2]float64{{0, 1000}, {9, 3000}}}, "PCIE_RX_PER_SEC": 2000,
	"NVLINK_TOTAL_TX_PER_SEC": 5000, "NVLINK_TOTAL_RX_PER_SEC": 4000,
}

// Clock event reason bits (nvmlClocksEventReason*), by the receiver's
// nvidia.gpu.clock.event.reason.
var clockEventBits = map[string]int{
	"gpu_idle": 0x1, "applications_clocks": 0x2, "sw_power_cap": 0x4, "hw_slowdown": 0x8, "sync_boost": 0x10,
	"sw_thermal_slowdown": 0x20, "hw_thermal_slowdown": 0x40, "hw_power_brake_slowdown": 0x80, "display_clocks": 0x100,
}

// steps is a Steps signal from t, value pairs.
func steps(tv ...float64) Steps {
	var s Steps
	for i := 0; i+1 < len(tv); i += 2 {
		s.Steps = append(s.Steps, [2]float64{tv[i], tv[i+1]})
	}
	return s
}

const driverVersion = "560.35.03"

var pipelineGPUs = []gpuSpec{
	{
		uuid: "GPU-e2e00000-0000-4000-8000-000000000000", name: "NVIDIA H200 (SIMULATED)", serial: "SIMULATED-E2E-0", pci: "00000000:19:00.0",
		general: 0.5, generalPeriod: 1.0 / 3, memUtil: 0.25, memPeriod: 2.0 / 3, encoder: 0.5,
		used: 2 << 30, total: 150754820096, reserved: 617086976,
		temp: 45, memTemp: 52, margin: 30, power: 250, powerLimit: 700, energyOffset: 1000, fan: -1,
		clocks: map[string]float64{"sm": 1980, "memory": 3201, "graphics": 1980, "video": 1755}, pstate: 0,
		processes: []Process{
			{PID: fakePID, Name: "python3 train.py", UsedMemoryBytes: 20 << 30, SMPercent: 60, MemoryPercent: 30},
			{PID: fakePID + 1, Name: "Xorg", Type: "graphics", UsedMemoryBytes: 1 << 30, SMPercent: 5},
		},
		gpm: gpm0,
		// Degraded from t = 5: an uncorrected ECC error (and its double-bit event).
		ecc:         map[string]Signal{"corrected": steps(0, 0, 6, 2), "uncorrected": steps(0, 0, 5, 1)},
		remapped:    map[string]Signal{"correctable": 1, "uncorrectable": 0, "pending": 0, "failure": 0},
		clockEvents: 0x4, // SW power cap: not a reason to degrade
		violation:   map[string]Signal{"power": 0.25, "thermal": 0, "sync_boost": 0, "board_limit": 0, "low_utilization": 0.5, "reliability": 0},
		pcie:        map[string]Signal{"link_generation": 5, "link_width": 16, "replays": steps(0, 3, 9, 7)},
		nvlink: map[string]Signal{"crc_flit": steps(0, 2, 7, 5), "crc_data": 1, "replay": steps(0, 0, 6, 4), "recovery": 0,
			"symbol": steps(0, 1, 8, 3)},
		ber: 3<<8 | 12, // 3e-12
		events: []Event{
			{At: 2, XID: 13}, {At: 3, Type: "single_bit_ecc"}, {At: 3.5, Type: "pstate"}, {At: 4, XID: 13},
			{At: 5, Type: "double_bit_ecc"}, {At: 6, XID: 31},
		},
	},
	{
		uuid: "GPU-e2e00000-0000-4000-8000-000000000001", name: "NVIDIA H200 (SIMULATED)", serial: "SIMULATED-E2E-1", pci: "00000000:2A:00.0",
		general: 0.25, generalPeriod: 2.0 / 3, memUtil: 0.5, memPeriod: 1.0 / 3, encoder: -1,
		used: 80 << 30, total: 150754820096, reserved: 617086976,
		temp: 40, tempAfter: 62, tempStep: 10, power: 400, powerNotSupported: true, powerLimit: 700, fan: 40,
		pcieKiBs: [2]Signal{1000, 2000},
		clocks:   map[string]float64{"sm": 1755, "memory": 3201, "graphics": 1755, "video": 1500}, pstate: 2,
		// Hot from t = 10: a software thermal slowdown (degraded), beside the power cap.
		clockEvents: steps(0, 0, 10, 0x24),
	},
	{
		uuid: "GPU-e2e00000-0000-4000-8000-000000000002", name: "NVIDIA H200 (SIMULATED)", serial: "SIMULATED-E2E-2", pci: "00000000:3B:00.0",
		general: 0.75, generalPeriod: 2.0 / 3, memUtil: 0.5, memPeriod: 1.0 / 3, encoder: -1,
		used: 0, total: 150754820096, reserved: 617086976,
		temp: 50, memTemp: 58, power: 300, powerLimit: 650, fan: -1,
		clocks: map[string]float64{"sm": 1980, "memory": 3201, "graphics": 1980, "video": 1755}, pstate: 0,
		hangFrom: 5, hangFor: 5,
	},
	{
		uuid: "GPU-e2e00000-0000-4000-8000-000000000003", name: "NVIDIA H100 PCIe (SIMULATED)", serial: "SIMULATED-E2E-3", pci: "00000000:5D:00.0",
		general: 0, generalPeriod: 1.0 / 3, memUtil: 0, memPeriod: 1.0 / 3, encoder: -1,
		used: 1 << 30, total: 85520809984, reserved: 570425344,
		temp: 35, power: 90, powerLimit: 350, fan: -1,
		clocks: map[string]float64{"sm": 345, "memory": 1593, "graphics": 345, "video": 765}, pstate: 8,
		// Degraded from t = 4 (a row remap pending after an uncorrectable
		// error, Xid 63), predicted_failure from t = 6 (the remap failed),
		// failed from t = 8 (lost; Xid 79 just before).
		remapped: map[string]Signal{"correctable": 0, "uncorrectable": steps(0, 0, 4, 1), "pending": steps(0, 0, 4, 1),
			"failure": steps(0, 0, 6, 1)},
		events: []Event{{At: 4, XID: 63}},
		lostAt: 8,
	},
}

func (g gpuSpec) scenarioGPU() GPU {
	out := GPU{
		Name: g.name, UUID: g.uuid, Serial: g.serial, PCIBusID: g.pci,
		Utilization: &Utilization{
			GPU:    &Duty{Busy: g.general, PeriodS: g.generalPeriod},
			Memory: &Duty{Busy: g.memUtil, PeriodS: g.memPeriod},
		},
		Memory:             &Memory{TotalBytes: g.total, ReservedBytes: g.reserved, UsedBytes: g.used},
		TemperatureC:       g.temp,
		MarginTemperatureC: g.margin,
		PCIeTxKiBs:         g.pcieKiBs[0],
		PCIeRxKiBs:         g.pcieKiBs[1],
		PowerW:             g.power,
		PowerLimitW:        g.powerLimit,
		EnergyOffsetJ:      g.energyOffset,
		ClocksMHz:          &Clocks{SM: g.clocks["sm"], Memory: g.clocks["memory"], Graphics: g.clocks["graphics"], Video: g.clocks["video"]},
		PState:             g.pstate,
		Processes:          []Process{},
		GPM:                g.gpm,
	}
	if g.processes != nil {
		out.Processes = g.processes
	}
	out.ECCErrors, out.RemappedRows, out.Violation, out.PCIe = g.ecc, g.remapped, g.violation, g.pcie
	out.ClocksEventReasons = g.clockEvents
	for typ, sig := range g.nvlink {
		if out.Fields == nil {
			out.Fields = map[string]Signal{}
		}
		out.Fields[nvlinkFields[typ]] = sig
		out.NVLinkLinks = 1 // so that the per-link sum (symbol) is the signal
	}
	if g.ber != nil {
		out.Fields["220"] = g.ber
	}
	out.Events = g.allEvents()
	if g.encoder >= 0 {
		out.Utilization.Encoder = &Duty{Busy: g.encoder, PeriodS: 1.0 / 3}
	}
	if g.memTemp > 0 {
		out.MemoryTemperatureC = g.memTemp
	}
	if g.tempStep > 0 {
		out.TemperatureC = Steps{Steps: [][2]float64{{0, g.temp}, {g.tempStep, g.tempAfter}}}
	}
	if g.powerNotSupported {
		out.NotSupported = []string{"nvmlDeviceGetPowerUsage"}
	}
	if g.fan >= 0 {
		out.FanPercent = g.fan
	}
	if g.lostAt > 0 {
		out.LostAt = ptr(g.lostAt)
	}
	if g.hangFor > 0 {
		out.Hangs = []Hang{{Call: "nvmlDeviceGetTemperature", From: g.hangFrom, Seconds: g.hangFor}}
	}
	return out
}

// allEvents are the GPU's events; a GPU that is lost says Xid 79 (fallen
// off the bus) half a second before.
func (g gpuSpec) allEvents() []Event {
	out := append([]Event(nil), g.events...)
	if g.lostAt > 0 {
		out = append(out, Event{At: g.lostAt - 0.5, XID: 79})
	}
	return out
}

// state is the hw.state the receiver must report at t, and the times at
// which it may change.
func (g gpuSpec) state(t float64) (string, []float64) {
	var edges []float64
	at := func(s Signal) float64 {
		if s == nil {
			return 0
		}
		edges = append(edges, signalEdges(s)...)
		return signalAt(s, t)
	}
	predictedFailure := at(g.remapped["failure"]) > 0
	degraded := at(g.remapped["pending"]) > 0 || at(g.ecc["uncorrected"]) > 0 ||
		int(at(g.clockEvents))&(clockEventBits["sw_thermal_slowdown"]|clockEventBits["hw_thermal_slowdown"]) != 0
	if g.lostAt > 0 {
		edges = append(edges, g.lostAt)
	}
	// A GPU whose read is stuck in a hang is reported degraded (issue 9);
	// a read started in the hang's last half second may finish in time.
	hung := g.hangFor > 0 && t >= g.hangFrom && t < g.hangFrom+g.hangFor
	if g.hangFor > 0 {
		edges = append(edges, g.hangFrom, g.hangFrom+g.hangFor-0.4, g.hangFrom+g.hangFor)
	}
	switch {
	case g.lostAt > 0 && t >= g.lostAt:
		return "failed", edges
	case hung:
		return "degraded", edges
	case predictedFailure:
		return "predicted_failure", edges
	case degraded:
		return "degraded", edges
	default:
		return "ok", edges
	}
}

// rowRemapStates is, per nvidia.gpu.memory.row_remap.state, the signal its
// nvidia.gpu.memory.row_remap.status series must follow: 1 in the current
// state (failed over pending, none without either), 0 in the others. Nil
// when the scenario has no row remapping (NOT_SUPPORTED).
func (g gpuSpec) rowRemapStates() map[string]Signal {
	pending, failure := g.remapped["pending"], g.remapped["failure"]
	if pending == nil || failure == nil {
		return map[string]Signal{"none": nil, "pending": nil, "failed": nil}
	}
	state := func(t float64) string {
		switch {
		case signalAt(failure, t) > 0:
			return "failed"
		case signalAt(pending, t) > 0:
			return "pending"
		}
		return "none"
	}
	out := map[string]Signal{}
	for _, s := range []string{"none", "pending", "failed"} {
		var tv []float64
		for _, e := range append(append([]float64{0}, signalEdges(pending)...), signalEdges(failure)...) {
			tv = append(tv, e, float64(boolInt(state(e) == s)))
		}
		out[s] = stepsSorted(tv...)
	}
	return out
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// stepsSorted is steps with its (time, value) pairs put in time order.
func stepsSorted(tv ...float64) Steps {
	s := steps(tv...)
	sort.SliceStable(s.Steps, func(i, j int) bool { return s.Steps[i][0] < s.Steps[j][0] })
	return s
}

// near reports whether t is within d of one of edges.
func near(t float64, edges []float64, d float64) bool {
	for _, e := range edges {
		if math.Abs(t-e) < d {
			return true
		}
	}
	return false
}

// checkedElsewhere are the enabled metrics this scenario cannot produce, and
// the test that checks them end to end instead: the container CPU needs GPU
// processes in containers (cgroups), which the pipeline's processes are not,
// and a process's CPU needs its /proc entry, which the pipeline's PIDs have
// not.
var checkedElsewhere = map[string]string{
	"process.cpu.time":               "TestWaste (a fake /proc whose utime grows)",
	"container.cpu.time":             "TestDashboardAndRules (cgroup fixtures), TestContainerCPUOnRealCgroup",
	"nvidia.gpu.container.cpu.limit": "TestDashboardAndRules (cgroup fixtures), TestContainerCPUOnRealCgroup",
	"nvidia.gpu.allocation":          "TestDRA (a kubelet that lists the GPUs' holders)",
}

func pipelineScenario() Scenario {
	s := Scenario{
		Comment:       "e2e: the pipeline test",
		DriverVersion: driverVersion,
		Sampling:      &Sampling{Hz: 6, Buffer: 120},
	}
	for _, g := range pipelineGPUs {
		s.GPUs = append(s.GPUs, g.scenarioGPU())
	}
	return s
}

// rel is p's time in scenario seconds.
func rel(p point, t0 time.Time) float64 { return p.Time.Sub(t0).Seconds() }

// dieSensor picks the GPU die's hw.temperature, one point per scrape.
var dieSensor = map[string]any{"hw.sensor_location": "gpu"}

func times(pts []point, t0 time.Time) []float64 {
	var out []float64
	for _, p := range pts {
		out = append(out, rel(p, t0))
	}
	sort.Float64s(out)
	return out
}

// TestPipeline: otelcol-nvml on the fake library, OTLP to a backend
// collector and scraped by Prometheus; four GPUs, one of which hangs a call
// for 5 s and one of which falls off the bus at t = 8.
func TestPipeline(t *testing.T) {
	t.Parallel()
	const runUntil = 17.0 // scenario seconds of data to collect
	md := readMetadata(t)
	bin := testutil.AbsFlag(t, "otelcol", *otelcolPath)

	be := startBackend(t, bin)
	// Every metric on, the one off by default too, so that the README's
	// whole table can be checked against Prometheus.
	settings := receiverSettings + "metrics:\n  nvidia.gpu.tensor.pipe.activity:\n    enabled: true\n" +
		"  nvidia.gpu.pcie.throughput:\n    enabled: true\n"
	col := startCollector(t, "collector under test", pipelineScenario().write(t), be, settings)
	prom := startPrometheus(t, col.promAddr)
	t0 := col.scenarioStart(t, 30*time.Second)
	t.Logf("scenario clock t = 0 at %s", t0.Format(time.RFC3339Nano))

	var pts []point
	waitFor(t, 60*time.Second, fmt.Sprintf("data points up to t = %.0f s", runUntil), func() bool {
		pts = be.points(t)
		last := times(filter(pts, pipelineGPUs[0].uuid, "hw.temperature", dieSensor), t0)
		recovered := times(filter(pts, pipelineGPUs[2].uuid, "hw.temperature", dieSensor), t0)
		return len(last) > 0 && last[len(last)-1] >= runUntil &&
			len(recovered) > 0 && recovered[len(recovered)-1] >= pipelineGPUs[2].hangFrom+pipelineGPUs[2].hangFor+2
	}, col.proc, be.proc, prom.proc)
	logs := col.proc.logs.String()
	t.Logf("%d data points in the backend", len(pts))

	// The GPUs' own resources, and the processes' (which carry process.pid).
	var gpuPts, procPts []point
	for _, p := range pts {
		if _, ok := p.Resource["process.pid"]; ok {
			procPts = append(procPts, p)
		} else {
			gpuPts = append(gpuPts, p)
		}
	}

	r := &pipelineRun{md: md, be: be, col: col, prom: prom, t0: t0, pts: pts, logs: logs, gpuPts: gpuPts, procPts: procPts}
	for _, c := range []struct {
		name  string
		check func(*pipelineRun, *testing.T)
	}{
		{"resources", (*pipelineRun).resources},
		{"instruments match metadata.yaml", (*pipelineRun).instruments},
		{"values equal the scenario", (*pipelineRun).values},
		{"utilization is the average over the window", (*pipelineRun).utilizationWindow},
		{"energy rises with the power", (*pipelineRun).energy},
		{"a lost GPU leaves the others reported", (*pipelineRun).lostGPU},
		{"a hung call delays only its GPU", (*pipelineRun).hungCall},
		{"processes", (*pipelineRun).processes},
		{"GPM", (*pipelineRun).gpm},
		{"health values equal the scenario", (*pipelineRun).health},
		{"hw.status follows the health", (*pipelineRun).hwStatus},
		{"XID events as metrics and log records", (*pipelineRun).xidEvents},
		{"prometheus has every GPU by hw_id", (*pipelineRun).prometheus},
		{"README metric names in Prometheus", (*pipelineRun).readmeNames},
	} {
		t.Run(c.name, func(t *testing.T) { c.check(r, t) })
	}

	assert.NotContains(t, logs, "panic")
	col.proc.requireAlive(t)
}

// pipelineRun is what one run of the pipeline scenario left to check:
// each of its methods is one of TestPipeline's subtests.
type pipelineRun struct {
	md      map[string]metricSpec
	be      *backend
	col     *collector
	prom    *prometheus
	t0      time.Time
	pts     []point
	logs    string
	gpuPts  []point
	procPts []point
}

// resources: resources.
func (r *pipelineRun) resources(t *testing.T) {
	pts, gpuPts := r.pts, r.gpuPts
	seen := map[string]bool{}
	for _, p := range pts {
		seen[p.UUID] = true
	}
	assert.Len(t, seen, len(pipelineGPUs), "every resource is one of the GPUs (hw.id): %v", seen)
	for i, g := range pipelineGPUs {
		gp := filter(gpuPts, g.uuid, "", nil)
		require.NotEmpty(t, gp, "no data from GPU %d (%s)", i, g.uuid)
		want := map[string]any{
			"hw.id": g.uuid, "hw.type": "gpu", "hw.vendor": "NVIDIA", "hw.model": g.name,
			"hw.serial_number": g.serial, "hw.driver_version": driverVersion,
			"nvidia.gpu.index": int64(i), "nvidia.gpu.pci_bus_id": g.pci,
		}
		for _, p := range gp {
			if !assert.Equal(t, want, p.Resource, "resource of GPU %d", i) {
				break
			}
		}
	}
}

// instruments: instruments match metadata.yaml.
func (r *pipelineRun) instruments(t *testing.T) {
	md, pts := r.md, r.pts
	seen := map[string]bool{}
	for _, p := range pts {
		seen[p.Metric] = true
		spec, ok := md[p.Metric]
		if !assert.True(t, ok, "%s is not in metadata.yaml", p.Metric) {
			continue
		}
		assert.Equal(t, scopeName, p.Scope)
		assert.Equal(t, spec.Unit, p.Unit, "unit of %s", p.Metric)
		if spec.Gauge {
			assert.Equal(t, pmetric.MetricTypeGauge, p.Type, "%s is a gauge", p.Metric)
		} else {
			assert.Equal(t, pmetric.MetricTypeSum, p.Type, "%s is a sum", p.Metric)
			assert.Equal(t, spec.Monotonic, p.Monotonic, "monotonic of %s", p.Metric)
			assert.Equal(t, pmetric.AggregationTemporalityCumulative, p.Temporality, "temporality of %s", p.Metric)
		}
		wantVT := pmetric.NumberDataPointValueTypeDouble
		if spec.Int {
			wantVT = pmetric.NumberDataPointValueTypeInt
		}
		assert.Equal(t, wantVT, p.ValueType, "value type of %s", p.Metric)
		if t.Failed() {
			return
		}
	}
	for name, spec := range md {
		if _, ok := checkedElsewhere[name]; ok {
			continue
		}
		if spec.Enabled {
			assert.True(t, seen[name], "enabled metric %s never arrived", name)
		}
	}
}

// values: values equal the scenario.
func (r *pipelineRun) values(t *testing.T) {
	t0, pts, logs, gpuPts := r.t0, r.pts, r.logs, r.gpuPts
	for i, g := range pipelineGPUs {
		eq := func(metric string, attrs map[string]any, want float64) {
			t.Helper()
			got := filter(gpuPts, g.uuid, metric, attrs)
			if !assert.NotEmpty(t, got, "GPU %d: no %s %v", i, metric, attrs) {
				return
			}
			for _, p := range got {
				if !assert.Equal(t, want, p.Value, "GPU %d: %s %v at t=%.2f", i, metric, attrs, rel(p, t0)) {
					return
				}
			}
		}
		none := func(metric string, attrs map[string]any, why string) {
			t.Helper()
			assert.Empty(t, filter(pts, g.uuid, metric, attrs), "GPU %d: %s %v: %s", i, metric, attrs, why)
		}
		eq("hw.gpu.memory.usage", nil, float64(g.used))
		eq("hw.gpu.memory.limit", nil, float64(g.total))
		eq("hw.gpu.memory.utilization", nil, float64(g.used)/float64(g.total))
		eq("nvidia.gpu.memory.reserved", nil, float64(g.reserved))
		eq("nvidia.gpu.power.limit", nil, g.powerLimit)
		eq("nvidia.gpu.performance_state", nil, g.pstate)
		for typ, mhz := range g.clocks {
			eq("nvidia.gpu.clock.frequency", map[string]any{"nvidia.gpu.clock.type": typ}, mhz*1e6)
		}
		if g.powerNotSupported {
			none("hw.power", nil, "its nvmlDeviceGetPowerUsage is NOT_SUPPORTED")
			assert.Equal(t, 1, logCount(logs, "NVML calls not supported on this GPU", g.uuid, "nvmlDeviceGetPowerUsage"),
				"GPU %d: the unsupported call is logged once", i)
		} else {
			eq("hw.power", nil, g.power)
		}
		if g.fan >= 0 {
			eq("nvidia.gpu.fan.speed", nil, g.fan/100)
		} else {
			none("nvidia.gpu.fan.speed", nil, "no fan in the scenario")
		}
		die := dieSensor
		if g.tempStep == 0 {
			eq("hw.temperature", die, g.temp)
		} else {
			var before, after int
			for _, p := range filter(pts, g.uuid, "hw.temperature", die) {
				switch r := rel(p, t0); {
				case r < g.tempStep-0.2:
					before++
					assert.Equal(t, g.temp, p.Value, "GPU %d: temperature at t=%.2f", i, r)
				case r > g.tempStep+0.2:
					after++
					assert.Equal(t, g.tempAfter, p.Value, "GPU %d: temperature at t=%.2f", i, r)
				}
			}
			assert.Positive(t, before, "GPU %d: temperature points before the step", i)
			assert.Positive(t, after, "GPU %d: temperature points after the step", i)
		}
		if mem := map[string]any{"hw.sensor_location": "memory"}; g.memTemp > 0 {
			eq("hw.temperature", mem, g.memTemp)
		} else {
			none("hw.temperature", mem, "FI_DEV_MEMORY_TEMP is NOT_SUPPORTED in the scenario")
		}
		none("hw.gpu.utilization", map[string]any{"hw.gpu.task": "decoder"}, "no decoder in the scenario")
		if g.encoder < 0 {
			none("hw.gpu.utilization", map[string]any{"hw.gpu.task": "encoder"}, "no encoder in the scenario")
		}
	}
}

// utilizationWindow: utilization is the average over the window.
func (r *pipelineRun) utilizationWindow(t *testing.T) {
	t0, pts := r.t0, r.pts
	for i, g := range pipelineGPUs {
		check := func(metric string, attrs map[string]any, want, period float64) {
			t.Helper()
			got := filter(pts, g.uuid, metric, attrs)
			sort.Slice(got, func(a, b int) bool { return got[a].Time.Before(got[b].Time) })
			if !assert.Greater(t, len(got), 3, "GPU %d: %s %v", i, metric, attrs) {
				return
			}
			// A window of n >= 5 samples of a pattern k samples long is
			// off by at most k/(2n); one instant sample reads 0 or 1.
			tol := 0.12 + 0.1*math.Max(0, period*6-2)/2
			var sum float64
			var vals []string
			for _, p := range got[1:] { // the first window is short
				sum += p.Value
				vals = append(vals, fmt.Sprintf("%.3f", p.Value))
				assert.InDelta(t, want, p.Value, tol, "GPU %d: %s %v at t=%.2f", i, metric, attrs, rel(p, t0))
			}
			mean := sum / float64(len(got)-1)
			assert.InDelta(t, want, mean, 0.05, "GPU %d: mean %s %v over %s", i, metric, attrs, strings.Join(vals, " "))
		}
		if graphics, ok := g.gpm["GRAPHICS_UTIL"].(int); ok {
			// A GPU with GPM: general utilization is GPM's graphics
			// utilization over the window; GPM's DRAM bandwidth stands
			// for the memory controller's window.
			check("hw.gpu.utilization", map[string]any{"hw.gpu.task": "general"}, float64(graphics)/100, 0)
			assert.Empty(t, filter(pts, g.uuid, "nvidia.gpu.memory.controller.utilization", nil), "GPU %d: controller window on a GPU with GPM", i)
		} else {
			check("hw.gpu.utilization", map[string]any{"hw.gpu.task": "general"}, g.general, g.generalPeriod)
			check("nvidia.gpu.memory.controller.utilization", nil, g.memUtil, g.memPeriod)
		}
		if g.encoder >= 0 {
			check("hw.gpu.utilization", map[string]any{"hw.gpu.task": "encoder"}, g.encoder, 1.0/3)
		}
	}
}

// energy: energy rises with the power.
func (r *pipelineRun) energy(t *testing.T) {
	t0, pts := r.t0, r.pts
	for i, g := range pipelineGPUs {
		got := filter(pts, g.uuid, "hw.energy", nil)
		sort.Slice(got, func(a, b int) bool { return got[a].Time.Before(got[b].Time) })
		if !assert.Greater(t, len(got), 3, "GPU %d: energy points", i) {
			continue
		}
		for k, p := range got {
			want := g.energyOffset + g.power*rel(p, t0)
			assert.InDelta(t, want, p.Value, math.Max(1, g.power*0.25), "GPU %d: energy at t=%.2f", i, rel(p, t0))
			if k > 0 {
				assert.GreaterOrEqual(t, p.Value, got[k-1].Value, "GPU %d: energy decreased at t=%.2f", i, rel(p, t0))
			}
		}
		first, last := got[0], got[len(got)-1]
		watts := (last.Value - first.Value) / last.Time.Sub(first.Time).Seconds()
		assert.InDelta(t, g.power, watts, g.power*0.05+0.5, "GPU %d: energy slope in W", i)
	}
}

// lostGPU: a lost GPU leaves the others reported.
func (r *pipelineRun) lostGPU(t *testing.T) {
	t0, pts, logs := r.t0, r.pts, r.logs
	lost := pipelineGPUs[3]
	lostTimes := times(filter(pts, lost.uuid, "hw.temperature", dieSensor), t0)
	assert.GreaterOrEqual(t, len(lostTimes), 4, "the GPU reports before it is lost")
	for _, metric := range []string{"hw.temperature", "hw.power", "hw.energy", "hw.gpu.utilization", "hw.gpu.memory.usage"} {
		for _, p := range filter(pts, lost.uuid, metric, nil) {
			assert.Less(t, rel(p, t0), lost.lostAt+0.1, "%s from the lost GPU after t=%.0f", metric, lost.lostAt)
		}
	}
	for i, g := range pipelineGPUs[:2] {
		var after int
		for _, r := range times(filter(pts, g.uuid, "hw.temperature", dieSensor), t0) {
			if r > lost.lostAt+1 {
				after++
			}
		}
		assert.GreaterOrEqual(t, after, 5, "GPU %d keeps reporting after GPU 3 is lost", i)
	}
	assert.Equal(t, 1, logCount(logs, "GPU is lost", lost.uuid), "the loss is logged once")
	// From then on the receiver says only that it failed, its Xid counts, and
	// its GPU-time counters: held stands still, unobserved (lost) grows.
	var after int
	lostCounters := map[string][]float64{}
	var lostUnobserved []float64
	for _, p := range filter(pts, lost.uuid, "", nil) {
		if rel(p, t0) < lost.lostAt+0.1 {
			continue
		}
		after++
		switch p.Metric {
		case "hw.status":
			want := 0.0
			if p.Attrs["hw.state"] == "failed" {
				want = 1
			}
			assert.Equal(t, want, p.Value, "lost GPU: hw.status %v at t=%.2f", p.Attrs, rel(p, t0))
		case "nvidia.gpu.xid.errors":
		case "nvidia.gpu.held.time", "nvidia.gpu.busy.time", "nvidia.gpu.active.time", "nvidia.gpu.idle.time", "nvidia.gpu.free.time":
			// Its GPU-time counters stay, standing still.
			lostCounters[p.Metric+fmt.Sprint(p.Attrs)] = append(lostCounters[p.Metric+fmt.Sprint(p.Attrs)], p.Value)
		case "nvidia.gpu.unobserved.time":
			if p.Attrs["nvidia.gpu.unobserved.reason"] == "lost" {
				lostUnobserved = append(lostUnobserved, p.Value)
			}
		default:
			assert.Fail(t, "a lost GPU reports only hw.status, its Xid counts and its GPU-time counters", "%s at t=%.2f", p.Metric, rel(p, t0))
		}
	}
	assert.Positive(t, after, "the lost GPU's hw.status after the loss")
	for k, vs := range lostCounters {
		assert.Equal(t, vs[0], vs[len(vs)-1], "lost GPU: %s stands still after the loss", k)
	}
	require.NotEmpty(t, lostUnobserved, "lost GPU: nvidia.gpu.unobserved.time{reason=lost} after the loss")
	assert.Greater(t, lostUnobserved[len(lostUnobserved)-1], lostUnobserved[0], "lost GPU: its time after the loss is unobserved (lost)")
}

// hungCall: a hung call delays only its GPU.
func (r *pipelineRun) hungCall(t *testing.T) {
	t0, pts, logs := r.t0, r.pts, r.logs
	hung := pipelineGPUs[2]
	from, until := hung.hangFrom, hung.hangFrom+hung.hangFor
	var recovered bool
	for _, r := range times(filter(pts, hung.uuid, "hw.temperature", dieSensor), t0) {
		// A read that started inside the hang cannot finish within the
		// 0.5 s timeout, except in the hang's last half second.
		assert.False(t, r > from+0.05 && r < until-0.6, "GPU 2 reported at t=%.2f, inside its hang [%.0f, %.0f)", r, from, until)
		recovered = recovered || r > until+0.5
	}
	assert.True(t, recovered, "GPU 2 reports again after its hang")
	// While stuck it is not silent: hw.status says degraded (issue 9).
	degraded := 0
	for _, p := range filter(pts, hung.uuid, "hw.status", map[string]any{"hw.state": "degraded"}) {
		if r := rel(p, t0); r > from+0.6 && r < until-0.6 && p.Value == 1 {
			degraded++
		}
	}
	assert.Positive(t, degraded, "GPU 2 reports hw.status degraded while its read is stuck")
	for i, g := range pipelineGPUs[:2] {
		ts := times(filter(pts, g.uuid, "hw.temperature", dieSensor), t0)
		var in int
		for k := 1; k < len(ts); k++ {
			if ts[k] < from-1 || ts[k-1] > until+1 {
				continue
			}
			in++
			assert.LessOrEqual(t, ts[k]-ts[k-1], 1.7, "GPU %d: gap %.2f..%.2f s while GPU 2 hangs", i, ts[k-1], ts[k])
		}
		assert.GreaterOrEqual(t, in, 5, "GPU %d: scrapes while GPU 2 hangs", i)
	}
	assert.GreaterOrEqual(t, logCount(logs, "did not finish before the scrape timeout", hung.uuid), 1)
}

// processes: processes.
func (r *pipelineRun) processes(t *testing.T) {
	t0, gpuPts, procPts := r.t0, r.gpuPts, r.procPts
	for i, g := range pipelineGPUs {
		if i == 3 {
			continue // lost
		}
		for _, p := range filter(gpuPts, g.uuid, "nvidia.gpu.process.count", nil) {
			if !assert.Equal(t, float64(len(g.processes)), p.Value, "GPU %d: process count at t=%.2f", i, rel(p, t0)) {
				break
			}
		}
		for _, p := range filter(gpuPts, g.uuid, "nvidia.gpu.process.dropped", nil) {
			assert.Zero(t, p.Value, "GPU %d: dropped", i)
		}
		pids := map[int64]bool{}
		for _, p := range filter(procPts, g.uuid, "", nil) {
			pid, _ := p.Resource["process.pid"].(int64)
			pids[pid] = true
		}
		assert.Len(t, pids, len(g.processes), "GPU %d: process resources %v", i, pids)
		for _, proc := range g.processes {
			mine := func(metric string, attrs map[string]any) []point {
				var out []point
				for _, p := range filter(procPts, g.uuid, metric, attrs) {
					if p.Resource["process.pid"] == int64(proc.PID) {
						out = append(out, p)
					}
				}
				return out
			}
			mem := mine("nvidia.gpu.process.memory.usage", nil)
			if assert.NotEmpty(t, mem, "GPU %d pid %d: memory", i, proc.PID) {
				for _, p := range mem {
					assert.Equal(t, float64(proc.UsedMemoryBytes), p.Value, "GPU %d pid %d: memory", i, proc.PID)
				}
			}
			for _, u := range []struct {
				metric string
				attrs  map[string]any
				pct    Signal
			}{
				{"nvidia.gpu.process.utilization", map[string]any{"hw.gpu.task": "general"}, proc.SMPercent},
				{"nvidia.gpu.process.memory.controller.utilization", nil, proc.MemoryPercent},
			} {
				want := 0.0
				if u.pct != nil {
					want = float64(u.pct.(int)) / 100
				}
				got := mine(u.metric, u.attrs)
				if assert.Greater(t, len(got), 2, "GPU %d pid %d: %s %v", i, proc.PID, u.metric, u.attrs) {
					for _, p := range got[1:] {
						assert.InDelta(t, want, p.Value, 1e-9, "GPU %d pid %d: %s %v at t=%.2f", i, proc.PID, u.metric, u.attrs, rel(p, t0))
					}
				}
			}
		}
	}
}

// gpm: GPM.
func (r *pipelineRun) gpm(t *testing.T) {
	t0, gpuPts := r.t0, r.gpuPts
	g := pipelineGPUs[0]
	frac := func(name string) float64 { return signalAt(g.gpm[name], 0) / 100 }
	for metric, want := range map[string]float64{
		"nvidia.gpu.sm.activity":                  frac("SM_UTIL"),
		"nvidia.gpu.sm.occupancy":                 frac("SM_OCCUPANCY"),
		"nvidia.gpu.graphics.activity":            frac("GRAPHICS_UTIL"),
		"nvidia.gpu.tensor.activity":              frac("ANY_TENSOR_UTIL"),
		"nvidia.gpu.memory.bandwidth.utilization": frac("DRAM_BW_UTIL"),
	} {
		got := filter(gpuPts, g.uuid, metric, nil)
		if assert.Greater(t, len(got), 3, "GPU 0: %s", metric) {
			for _, p := range got {
				assert.InDelta(t, want, p.Value, 1e-9, "GPU 0: %s at t=%.2f", metric, rel(p, t0))
			}
		}
	}
	for pipe, name := range map[string]string{"fp16": "FP16_UTIL", "fp32": "FP32_UTIL", "fp64": "FP64_UTIL", "integer": "INTEGER_UTIL"} {
		got := filter(gpuPts, g.uuid, "nvidia.gpu.pipe.activity", map[string]any{"nvidia.gpu.pipe": pipe})
		assert.Greater(t, len(got), 3, "GPU 0: %s pipe", pipe)
		for _, p := range got {
			assert.InDelta(t, frac(name), p.Value, 1e-9, "GPU 0: %s pipe", pipe)
		}
	}
	checkTraffic(t, "GPU 0", filter(gpuPts, g.uuid, "", nil), g.gpm, t0)
	for i, other := range pipelineGPUs[1:] {
		assert.Empty(t, filter(gpuPts, other.uuid, "nvidia.gpu.sm.activity", nil), "GPU %d has no GPM", i+1)
		assert.Empty(t, filter(gpuPts, other.uuid, "hw.gpu.io", nil), "GPU %d has no GPM", i+1)
	}
}

// health: health values equal the scenario.
func (r *pipelineRun) health(t *testing.T) {
	t0, gpuPts := r.t0, r.gpuPts
	for i, g := range pipelineGPUs {
		// follows checks every point of metric against sig (times scale),
		// away from the times sig changes; a nil sig: no point at all.
		follows := func(metric string, attrs map[string]any, sig Signal, scale float64) {
			t.Helper()
			got := filter(gpuPts, g.uuid, metric, attrs)
			if sig == nil {
				assert.Empty(t, got, "GPU %d: %s %v is not in the scenario (NOT_SUPPORTED)", i, metric, attrs)
				return
			}
			var n int
			for _, p := range got {
				r := rel(p, t0)
				if near(r, signalEdges(sig), 0.3) || (g.lostAt > 0 && r >= g.lostAt) {
					continue
				}
				n++
				if !assert.Equal(t, signalAt(sig, r)*scale, p.Value, "GPU %d: %s %v at t=%.2f", i, metric, attrs, r) {
					return
				}
			}
			assert.Greater(t, n, 3, "GPU %d: %s %v", i, metric, attrs)
		}
		for metric, attrs := range map[string]map[string]Signal{
			"hw.errors":                        {"corrected": g.ecc["corrected"], "uncorrected": g.ecc["uncorrected"]},
			"nvidia.gpu.memory.row_remap.rows": {"corrected": g.remapped["correctable"], "uncorrected": g.remapped["uncorrectable"]},
		} {
			for typ, sig := range attrs {
				follows(metric, map[string]any{"error.type": typ}, sig, 1)
			}
		}
		for state, sig := range g.rowRemapStates() {
			follows("nvidia.gpu.memory.row_remap.status", map[string]any{"nvidia.gpu.memory.row_remap.state": state}, sig, 1)
		}
		follows("nvidia.gpu.pcie.replays", nil, g.pcie["replays"], 1)
		for typ := range nvlinkFields {
			follows("nvidia.gpu.nvlink.errors", map[string]any{"nvidia.gpu.nvlink.error.type": typ}, g.nvlink[typ], 1)
		}
		follows("nvidia.gpu.pcie.link.generation", nil, g.pcie["link_generation"], 1)
		follows("nvidia.gpu.pcie.link.width", nil, g.pcie["link_width"], 1)
		for reason, bit := range clockEventBits {
			var sig Signal
			if g.clockEvents != nil {
				var tv []float64
				for _, e := range append([]float64{0}, signalEdges(g.clockEvents)...) {
					tv = append(tv, e, float64(int(signalAt(g.clockEvents, e))&bit/bit))
				}
				sig = steps(tv...)
			}
			follows("nvidia.gpu.clock.event.active", map[string]any{"nvidia.gpu.clock.event.reason": reason}, sig, 1)
		}
		// Time held back: each policy's fraction of time, integrated
		// since t = 0. The receiver reads it a little after the point's
		// timestamp (the start of the read).
		for reason, frac := range g.violation {
			got := filter(gpuPts, g.uuid, "nvidia.gpu.clock.event.time", map[string]any{"nvidia.gpu.clock.event.reason": reason})
			if !assert.Greater(t, len(got), 3, "GPU %d: throttle time %s", i, reason) {
				continue
			}
			for _, p := range got {
				r := rel(p, t0)
				want := signalIntegral(frac, 0, r)
				assert.InDelta(t, want+0.05*signalAt(frac, r), p.Value, 0.1*signalAt(frac, r)+1e-6,
					"GPU %d: throttle time %s at t=%.2f", i, reason, r)
			}
		}
		if g.violation == nil {
			assert.Empty(t, filter(gpuPts, g.uuid, "nvidia.gpu.clock.event.time", nil), "GPU %d: no violation counters", i)
		}
	}
}

// hwStatus: hw.status follows the health.
func (r *pipelineRun) hwStatus(t *testing.T) {
	t0, gpuPts := r.t0, r.gpuPts
	for i, g := range pipelineGPUs {
		seen := map[string]int{}
		for _, p := range filter(gpuPts, g.uuid, "hw.status", nil) {
			r := rel(p, t0)
			state, edges := g.state(r)
			if near(r, edges, 0.3) {
				continue
			}
			want := 0.0
			if p.Attrs["hw.state"] == state {
				want = 1
				seen[state]++
			}
			assert.Equal(t, want, p.Value, "GPU %d: hw.status{hw.state=%v} at t=%.2f (the GPU is %s)", i, p.Attrs["hw.state"], r, state)
		}
		// Every state the scenario goes through is seen.
		for _, r := range []float64{1, 3, 4.5, 7, 9, 12, 16} {
			state, _ := g.state(r)
			assert.Positive(t, seen[state], "GPU %d: never reported %s (as at t=%.0f)", i, state, r)
		}
	}
}

// xidEvents: XID events as metrics and log records.
func (r *pipelineRun) xidEvents(t *testing.T) {
	be, t0, pts := r.be, r.t0, r.pts
	records := be.logs(t)
	for i, g := range pipelineGPUs {
		// nvidia.gpu.xid.errors counts each code's events so far; an event
		// reaches the count within a scrape or so. The receiver reads the
		// counts when the scrape's reads are done (up to its 0.5 s timeout
		// later, while GPU 2 hangs) but stamps them with the read's start.
		codes := map[int64][]float64{}
		for _, e := range g.allEvents() {
			if e.Type == "" || e.Type == "xid" {
				codes[int64(e.XID)] = append(codes[int64(e.XID)], e.At)
			}
		}
		for _, p := range filter(pts, g.uuid, "nvidia.gpu.xid.errors", nil) {
			code, _ := p.Attrs["nvidia.gpu.xid"].(int64)
			if !assert.Contains(t, codes, code, "GPU %d: Xid %d is not in the scenario", i, code) {
				continue
			}
			lo, hi, r := 0.0, 0.0, rel(p, t0)
			for _, at := range codes[code] {
				if at <= r-0.5 {
					lo++
				}
				if at <= r+0.6 {
					hi++
				}
			}
			assert.True(t, p.Value >= lo && p.Value <= hi, "GPU %d: Xid %d count %.0f at t=%.2f, want %.0f..%.0f", i, code, p.Value, r, lo, hi)
		}
		for code, ats := range codes {
			got := filter(pts, g.uuid, "nvidia.gpu.xid.errors", map[string]any{"nvidia.gpu.xid": code})
			sort.Slice(got, func(a, b int) bool { return got[a].Time.Before(got[b].Time) })
			if assert.NotEmpty(t, got, "GPU %d: Xid %d", i, code) {
				assert.Equal(t, float64(len(ats)), got[len(got)-1].Value, "GPU %d: Xid %d count at the end", i, code)
			}
		}

		// One log record per XID or ECC event, on the GPU's resource.
		type rec struct {
			event, severity string
			xid             any
		}
		var want, gotRecs []rec
		for _, e := range g.allEvents() {
			switch e.Type {
			case "", "xid":
				want = append(want, rec{"nvidia.gpu.xid", "ERROR", int64(e.XID)})
			case "single_bit_ecc":
				want = append(want, rec{"nvidia.gpu.ecc.single_bit", "WARN", nil})
			case "double_bit_ecc":
				want = append(want, rec{"nvidia.gpu.ecc.double_bit", "ERROR", nil})
			}
		}
		for _, lr := range records {
			if lr.UUID != g.uuid {
				continue
			}
			gotRecs = append(gotRecs, rec{lr.EventName, lr.SeverityText, lr.Attrs["nvidia.gpu.xid"]})
			assert.Equal(t, scopeName, lr.Scope)
			assert.Equal(t, g.name, lr.Resource["hw.model"], "GPU %d: the log record's resource", i)
			assert.Equal(t, g.pci, lr.Resource["nvidia.gpu.pci_bus_id"], "GPU %d: the log record's resource", i)
			wantSev := map[string]plog.SeverityNumber{"ERROR": plog.SeverityNumberError, "WARN": plog.SeverityNumberWarn}[lr.SeverityText]
			assert.Equal(t, wantSev, lr.Severity, "GPU %d: severity number of %s", i, lr.EventName)
			var at []float64
			for _, e := range g.allEvents() {
				at = append(at, e.At)
			}
			assert.True(t, near(lr.Time.Sub(t0).Seconds(), at, 0.5), "GPU %d: %s at t=%.2f, when no event was due", i, lr.EventName, lr.Time.Sub(t0).Seconds())
		}
		assert.ElementsMatch(t, want, gotRecs, "GPU %d: log records", i)
	}
	for _, lr := range records {
		_, ok := map[string]bool{pipelineGPUs[0].uuid: true, pipelineGPUs[3].uuid: true}[lr.UUID]
		assert.True(t, ok, "a log record of a GPU without events: %+v", lr)
	}
}

// prometheus: prometheus has every GPU by hw_id.
func (r *pipelineRun) prometheus(t *testing.T) {
	col, prom := r.col, r.prom
	var series []promSeries
	byGPU := map[string]map[string]promSeries{}
	waitFor(t, 30*time.Second, "every GPU's series in Prometheus", func() bool {
		series = prom.query(t, `{job="otelcol-nvml", hw_id!=""}`)
		byGPU = map[string]map[string]promSeries{}
		for _, s := range series {
			if byGPU[s.Metric["hw_id"]] == nil {
				byGPU[s.Metric["hw_id"]] = map[string]promSeries{}
			}
			key := s.Metric["__name__"]
			if loc := s.Metric["hw_sensor_location"]; loc != "" {
				key += "/" + loc // hw_temperature_celsius: one series per sensor
			}
			byGPU[s.Metric["hw_id"]][key] = s
		}
		for _, g := range pipelineGPUs {
			if len(byGPU[g.uuid]) < 10 {
				return false
			}
		}
		return true
	}, col.proc, prom.proc)
	for i, g := range pipelineGPUs {
		m := byGPU[g.uuid]
		want := map[string]float64{
			"hw_gpu_memory_usage_bytes":        float64(g.used),
			"hw_gpu_memory_limit_bytes":        float64(g.total),
			"nvidia_gpu_memory_reserved_bytes": float64(g.reserved),
			"nvidia_gpu_power_limit_watts":     g.powerLimit,
		}
		if !g.powerNotSupported {
			want["hw_power_watts"] = g.power
		}
		if g.tempStep == 0 {
			want["hw_temperature_celsius/gpu"] = g.temp
		}
		if g.memTemp > 0 {
			want["hw_temperature_celsius/memory"] = g.memTemp
		}
		for name, v := range want {
			s, ok := m[name]
			if assert.True(t, ok, "GPU %d: no %s in Prometheus (has %v)", i, name, keys(m)) {
				assert.Equal(t, v, s.value(t), "GPU %d: %s", i, name)
				assert.Equal(t, g.name, s.Metric["hw_model"], "GPU %d: %s", i, name)
			}
		}
		names := []string{"hw_gpu_utilization_ratio", "hw_gpu_memory_utilization_ratio", "hw_energy_joules_total", "nvidia_gpu_clock_frequency_hertz"}
		if g.gpm == nil { // a GPU with GPM reads no controller window by default
			names = append(names, "nvidia_gpu_memory_controller_utilization_ratio")
		}
		for _, name := range names {
			assert.Contains(t, m, name, "GPU %d", i)
		}
	}
	// Every GPU series of the job carries hw_id.
	for _, s := range prom.query(t, `{job="otelcol-nvml", hw_id=""}`) {
		name := s.Metric["__name__"]
		assert.False(t, strings.HasPrefix(name, "hw_") || strings.HasPrefix(name, "nvidia_"), "%s without hw_id: %v", name, s.Metric)
	}
}

// readmeNames: README metric names in Prometheus.
func (r *pipelineRun) readmeNames(t *testing.T) { checkREADMEMetrics(t, r.md, r.prom, r.col) }

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func initScenario() Scenario {
	return Scenario{
		Comment: "e2e: nvmlInit fails twice, then succeeds",
		Init:    &InitFaults{FailFirst: 2, Return: "DRIVER_NOT_LOADED"},
		GPUs: []GPU{{
			UUID:         "GPU-e2e11111-0000-4000-8000-000000000000",
			Name:         "NVIDIA H200 (SIMULATED)",
			Memory:       &Memory{TotalBytes: 150754820096, UsedBytes: 1 << 30},
			TemperatureC: 33,
			PowerW:       80,
		}},
	}
}

// TestInitFailsThenRecovers: the driver is "not loaded" for the first two
// nvmlInit calls; the receiver backs off (5 s, then 10 s) and metrics flow
// from the third, without a restart.
func TestInitFailsThenRecovers(t *testing.T) {
	t.Parallel()
	s := initScenario()
	uuid := s.GPUs[0].UUID
	be := startBackend(t, testutil.AbsFlag(t, "otelcol", *otelcolPath))
	col := startCollector(t, "collector with a late driver", s.write(t), be, receiverSettings)
	t0 := col.scenarioStart(t, 45*time.Second)
	waitFor(t, 20*time.Second, "data points of the GPU", func() bool {
		return len(filter(be.points(t), uuid, "hw.temperature", nil)) >= 2
	}, col.proc, be.proc)

	logs := col.proc.logs.String()
	assert.Equal(t, 2, logCount(logs, "fakenvml: SIMULATED NVML: injected nvmlInit failure", "ERROR_DRIVER_NOT_LOADED"))
	assert.Equal(t, 1, logCount(logs, "NVML is unavailable", "the NVIDIA kernel driver is not loaded"), "one warning per cause")
	assert.Equal(t, 1, logCount(logs, "NVML initialized"))
	late := t0.Sub(col.proc.started)
	t.Logf("nvmlInit succeeded %.1f s after the collector started", late.Seconds())
	assert.Greater(t, late, 14*time.Second, "backoff: 5 s after the first failure, 10 s after the second")
	assert.Less(t, late, 30*time.Second)
	for _, p := range filter(be.points(t), uuid, "hw.temperature", nil) {
		assert.Equal(t, 33.0, p.Value)
	}
	col.proc.requireAlive(t)
}

// TestMalformedScenario: a scenario the library cannot parse fails nvmlInit
// cleanly (NVML_ERROR_UNKNOWN); the collector logs that NVML is unavailable
// and keeps running.
func TestMalformedScenario(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct{ content, why string }{
		"broken JSON":   {`{"gpus": [{"uuid": "GPU-1", `, "not valid JSON"},
		"invalid value": {`{"gpus": [{"memory": {"total_bytes": 10, "used_bytes": 20}}]}`, "gpus[0].memory.used_bytes"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			col := startCollector(t, "collector on a malformed scenario", writeFile(t, t.TempDir(), "bad.json", tc.content), nil,
				receiverSettings)
			waitFor(t, 30*time.Second, `"NVML is unavailable" in the log`, func() bool {
				return strings.Contains(col.proc.logs.String(), "NVML is unavailable")
			}, col.proc)
			time.Sleep(2 * time.Second)
			col.proc.requireAlive(t)
			logs := col.proc.logs.String()
			assert.Equal(t, 1, logCount(logs, "fakenvml: scenario", "is invalid, nvmlInit fails with NVML_ERROR_UNKNOWN", tc.why), "the library says why")
			assert.Equal(t, 1, logCount(logs, "NVML is unavailable", "nvmlInit failed: Unknown Error"))
			assert.NotContains(t, logs, "NVML initialized")
			assert.NotContains(t, logs, "panic")
			col.proc.stop(t)
			assert.NoError(t, col.proc.waitErr, "clean exit on SIGTERM")
		})
	}
}

// checkTraffic checks the GPM byte counters among pts (one resource's
// points) against gpm's MiB/s rates: monotonic, and each rise the rate
// integrated over the time between the two points.
func checkTraffic(t *testing.T, who string, pts []point, gpm map[string]Signal, t0 time.Time) {
	t.Helper()
	for _, c := range []struct{ metric, dir, name string }{
		{"hw.gpu.io", "transmit", "PCIE_TX_PER_SEC"}, {"hw.gpu.io", "receive", "PCIE_RX_PER_SEC"},
		{"nvidia.gpu.nvlink.io", "transmit", "NVLINK_TOTAL_TX_PER_SEC"}, {"nvidia.gpu.nvlink.io", "receive", "NVLINK_TOTAL_RX_PER_SEC"},
	} {
		got := filter(pts, "", c.metric, map[string]any{"network.io.direction": c.dir})
		rate, ok := gpm[c.name]
		if !ok {
			assert.Empty(t, got, "%s: %s %s without %s in the scenario", who, c.metric, c.dir, c.name)
			continue
		}
		sort.Slice(got, func(a, b int) bool { return got[a].Time.Before(got[b].Time) })
		if !assert.Greater(t, len(got), 3, "%s: %s %s", who, c.metric, c.dir) {
			continue
		}
		peak := 0.0
		for _, e := range append([]float64{0}, signalEdges(rate)...) {
			peak = math.Max(peak, signalAt(rate, e))
		}
		for k := 1; k < len(got); k++ {
			assert.GreaterOrEqual(t, got[k].Value, got[k-1].Value, "%s: %s %s decreased", who, c.metric, c.dir)
			a, b := rel(got[k-1], t0), rel(got[k], t0)
			want := signalIntegral(rate, a, b) * (1 << 20)
			// The receiver times its windows itself, a few ms off the points'
			// timestamps.
			assert.InDelta(t, want, got[k].Value-got[k-1].Value, peak*(1<<20)*0.05,
				"%s: %s %s rose by %.0f B over t=%.2f..%.2f (%.0f MiB/s)", who, c.metric, c.dir, got[k].Value-got[k-1].Value, a, b, signalAt(rate, b))
		}
		// The counter starts with the first GPM window, at the collector's start.
		first := rel(got[0], t0)
		assert.InDelta(t, signalIntegral(rate, 0, first)*(1<<20), got[0].Value, peak*(1<<20)*0.8,
			"%s: %s %s at t=%.2f", who, c.metric, c.dir, first)
	}
}
