//go:build cgo

package nvmlclient

import (
	"sync"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient/guard"
)

// Priming takes a GPU's baselines: the newest utilization samples (so that the first read averages from then on), the GPM sample
// pair and the MIG inventory. These are per-GPU calls that can hang, so
// they are not part of Open: each GPU primes under its own use (guard/use.go), on
// the first Prime or Read, and a GPU still priming is skipped by scrapes
// like one whose read is still running.

// Prime primes the device unless it is primed already. ErrBusy while a
// read or priming of the device runs; ErrGPULost once the GPU is lost.
func (d *Device) Prime() error {
	t, err := d.enter()
	if err != nil {
		return err
	}
	defer d.exit(t)
	d.prime()
	return nil
}

// enter begins a use of the device's NVML handle: a read, priming or a
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

// prime runs under the device's use.
func (d *Device) prime() {
	if d.state.primed.Load() {
		return
	}
	if raw, ret := d.gpu.Session.Raw.Device(d.Info.UUID); ret == nvml.SUCCESS {
		d.gpu.Raw = raw
	}
	d.gpu.Plan.GPM.HasGPM = d.gpu.ProbeGPM() // before the collectors, which read it
	d.parts.Prime(d.gpu)
	// An error while priming only costs a window its start; the next read
	// reports it if it persists.
	d.gpu.FlushSupportLogs()
	d.state.primed.Store(true)
}

// release frees what priming allocated in NVML (GPM samples).
func (d *Device) release() {
	d.parts.Release()
}

// PrimeAll primes every device at once and waits for them all: for tools
// and tests. The receiver primes each GPU under a scrape's deadline.
func (c *Client) PrimeAll() {
	var wg sync.WaitGroup
	for _, d := range c.Devices() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = d.Prime()
		}()
	}
	wg.Wait()
}
