//go:build cgo

package nvmlclient

import (
	"sync"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// Priming takes a GPU's baselines: the newest utilization samples (so that the first read averages from then on), the GPM sample
// pair and the MIG inventory. These are per-GPU calls that can hang, so
// they are not part of Open: each GPU primes under its own busy flag, on
// the first Prime or Read, and a GPU still priming is skipped by scrapes
// like one whose read is still running.

// Prime primes the device unless it is primed already. ErrBusy while a
// read or priming of the device runs; ErrGPULost once the GPU is lost.
func (d *Device) Prime() error {
	if d.lost.Load() {
		return ErrGPULost
	}
	if !d.busy.CompareAndSwap(false, true) {
		return ErrBusy
	}
	defer d.busy.Store(false)
	if !d.calls.begin() {
		return ErrNotOpen // the session is closing
	}
	defer d.calls.end()
	leave := d.lane.enter()
	defer leave()
	d.prime()
	return nil
}

// Primed reports whether the device has been primed.
func (d *Device) Primed() bool { return d.primed.Load() }

// prime runs under busy.
func (d *Device) prime() {
	if d.primed.Load() {
		return
	}
	if raw, ret := d.rawLib.device(d.Info.UUID); ret == nvml.SUCCESS {
		d.raw = raw
	}
	d.primeWindows()
	if d.wanted[callGPMSampleGet] {
		d.initGPM(d.lib, d.symbols)
	}
	d.takeMIGInventory(d.lib, d.symbols)
	for _, m := range d.migs {
		if raw, ret := d.rawLib.device(m.info.UUID); ret == nvml.SUCCESS {
			m.raw = raw
		}
	}
	d.support.flushLogs(d.logger)
	d.primed.Store(true)
}

// release frees what priming allocated in NVML (GPM samples).
func (d *Device) release() {
	d.gpm.free()
	for _, m := range d.migs {
		m.gpm.free()
	}
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
