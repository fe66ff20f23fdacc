//go:build cgo

package nvmlclient

import (
	"sync/atomic"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"go.uber.org/zap"

	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient/call"
	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient/collect"
	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient/guard"
	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient/sample"
)

// Device reads one GPU. Reads of one device never overlap: a read that is
// still stuck in NVML makes the next one return ErrBusy instead of piling up
// goroutines (guard/use.go).
type Device struct {
	Info DeviceInfo

	// gpu is the GPU as its calls see it: its handles, its session, its
	// plan and its call record (call/gpu.go), the handle its collectors read
	// through.
	gpu   *call.GPU
	use   guard.DeviceUse // one use of the handle at a time: a read, the baselines, a check or a share sample
	state deviceState

	collectors *collect.Set // the collectors that read the GPU (collect/collectors.go)
}

// deviceState is what NVML has said of the GPU.
type deviceState struct {
	lost      atomic.Bool
	baselines atomic.Bool // taken
}

func newDevice(lib nvml.Interface, h nvml.Device, t call.Table, info DeviceInfo, sym call.Symbols, logger *zap.Logger) *Device {
	d := &Device{Info: info, gpu: call.NewGPU(lib, h, t, info.UUID, sym,
		logger.With(zap.String("hw.id", info.UUID), zap.Int("nvidia.gpu.index", info.Index)))}
	d.collectors = collect.New()
	return d
}

// configure applies the client's options: a call is wanted only while a
// reading it answers is asked for.
func (d *Device) configure(o options) {
	d.collectors.Configure(collect.Options{Processes: o.processes, MemoryControllerOnGPM: o.memCtrlOnGPM, CounterInterval: o.counterInterval})
	d.gpu.Configure(o.readings, o.leftOut, o.now)
}

// Lost reports whether NVML has said this GPU is lost.
func (d *Device) Lost() bool { return d.state.lost.Load() }

// Read takes one Sample of the device. A call the device does not support
// leaves its readings absent. A call that fails otherwise drops only the
// readings it feeds: the sample comes back with a *ReadError that names the
// calls and counts the metrics left out. Only where readings must agree is a
// group all or nothing: the GPM sample with its metrics, and the process
// list with its utilization.
func (d *Device) Read() (sample.Sample, error) {
	lane, err := d.enter()
	if err != nil {
		return sample.Sample{}, err
	}
	defer d.exit(lane)
	d.takeBaselines()

	s := sample.Sample{Time: d.gpu.Plan.Now()} // the device clock: windows and counters agree with GPM's
	if n := d.gpu.Table.Plain(); n > 0 {
		s.Values = make([]sample.Opt[float64], n)
	}
	r := d.collectors.Read(d.gpu, &s)
	d.gpu.FlushSupportLogs()

	if r.Lost || d.state.lost.Load() {
		d.markLost(r.LostCall)
		return sample.Sample{}, ErrGPULost
	}
	d.gpu.Session.Lost.OK(d.Info.UUID)
	d.gpu.LogCalls(r.Failed)
	if len(r.Failed) == 0 {
		return s, nil
	}
	return s, &ReadError{Calls: r.Failed, Metrics: d.gpu.LeftOutBy(r.Failed)}
}

// Check asks the GPU one cheap question (its temperature) to learn whether
// it still answers, without reading its readings: a receiver with only the
// event watcher must still see every GPU lost, to re-initialize NVML after
// a driver reload. It returns ErrGPULost once NVML says so and ErrBusy while
// a read is stuck in NVML; any other answer, a failure too, is an answer.
func (d *Device) Check() error {
	lane, err := d.enter()
	if err != nil {
		return err
	}
	defer d.exit(lane)
	ret := func() (ret nvml.Return) {
		defer func() {
			if p := recover(); p != nil {
				d.gpu.CountPanic(p)
				ret = nvml.ERROR_UNKNOWN
			}
		}()
		_, ret = d.gpu.Table[call.Check].Get(d.gpu.Handle)
		return ret
	}()
	if call.Classify(ret) == call.OutcomeLost {
		d.markLost(call.Check)
		return ErrGPULost
	}
	d.gpu.Session.Lost.OK(d.Info.UUID)
	return nil
}

// markLost records that the GPU fell off the bus, logged once, at warn as
// every other cause: hw.status failed and the GPULost alert say it where it
// is watched, and the collector's logger adds a stack trace to an error.
func (d *Device) markLost(c call.ID) {
	if d.state.lost.CompareAndSwap(false, true) && d.gpu.Session.Lost.Once(d.Info.UUID) {
		d.gpu.Logger.Warn("GPU is lost (fallen off the bus); no more metrics from it until NVML is re-initialized",
			zap.String("call", d.gpu.Table.Name(c)))
	}
}

// A GPU's baselines are the newest utilization samples (so that the first
// read averages from then on), the GPM sample pair and the MIG inventory.
// These are per-GPU calls that can hang, so they are not part of Open:
// each GPU takes them under its own use (guard/use.go), on the first Prime
// or Read, and a GPU still taking them is skipped by scrapes like one
// whose read is still running.

// Prime takes the device's baselines unless they are taken already.
// ErrBusy while a read of the device or its baselines run; ErrGPULost once
// the GPU is lost.
func (d *Device) Prime() error {
	t, err := d.enter()
	if err != nil {
		return err
	}
	defer d.exit(t)
	d.takeBaselines()
	return nil
}

// enter begins a use of the device's NVML handle: a read, the baselines or a
// check. It takes the device (ErrBusy while another use runs, or a share
// sample past its bound: guard/use.go), counts the call in the session's
// (ErrNotOpen once Close has begun) and waits for the session's lane.
// ErrGPULost once the GPU is lost.
func (d *Device) enter() (lane *guard.Ticket, err error) {
	if d.state.lost.Load() {
		return nil, ErrGPULost
	}
	if !d.use.Take() {
		return nil, ErrBusy
	}
	if !d.gpu.Session.Calls.Begin() {
		d.use.Release()
		return nil, ErrNotOpen // the session is closing
	}
	return d.gpu.Session.Lane.Enter(), nil
}

// exit ends what enter began.
func (d *Device) exit(lane *guard.Ticket) {
	lane.Leave()
	d.gpu.Session.Calls.End()
	d.use.Release()
}

// takeBaselines runs under the device's use.
func (d *Device) takeBaselines() {
	if d.state.baselines.Load() {
		return
	}
	if raw, ret := d.gpu.Session.Raw.Device(d.Info.UUID); ret == nvml.SUCCESS {
		d.gpu.Raw = raw
	}
	d.gpu.Plan.GPM.HasGPM = d.gpu.ProbeGPM() // before the collectors, which read it
	d.collectors.TakeBaselines(d.gpu)
	// An error while taking them only costs a window its start; the next read
	// reports it if it persists.
	d.gpu.FlushSupportLogs()
	d.state.baselines.Store(true)
}

// release frees what the baselines allocated in NVML (GPM samples).
func (d *Device) release() {
	d.collectors.Release()
}
