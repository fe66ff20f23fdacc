//go:build cgo

package nvmlclient

import (
	"sync"
	"sync/atomic"
	"time"
)

// A Device reads its GPU through a list of collectors, each one part of
// the read that owns that part's state: its baselines, its windows, what
// it carries from one read to the next. Read runs them in order on one
// reading (reading.go), which alone makes NVML calls; a panic in one
// collector's own code fails that collector alone.
type collector interface {
	// prime takes the part's baselines, once, before the first read.
	prime(d *Device)
	// read fills the part's figures of s.
	read(r *reading, s *Sample)
}

// The collectors, in the order a read runs them.
type (
	// gpmCollector: GPM's activity and traffic over the scrape window
	// (gpm.go). First: the general utilization of a GPU with GPM comes
	// from it.
	gpmCollector struct{ gpmState }
	// utilizationCollector: the engines' and memory controller's
	// utilization over the window since the previous read (sampling.go).
	utilizationCollector struct {
		windows      [samplingCount]window
		lastRead     time.Time // the device clock's time of the previous read, for the codec windows
		memCtrlOnGPM bool      // read the memory controller window on GPUs with GPM too
	}
	// getterCollector: the memory, and every plain getter of the read
	// table (fields.go).
	getterCollector struct{}
	// processCollector: the process lists, their utilization and busy
	// shares (processes.go).
	processCollector struct {
		on     bool // WithProcesses
		shares processShares
		// listed says the newest read listed a process: the share sampler
		// samples only such GPUs.
		listed atomic.Bool
	}
	// fieldCollector: the field rows of the read table read at every
	// scrape, in one batch (fields.go).
	fieldCollector struct{ batch fieldBatch }
	// healthCollector: the remapped rows (health.go); the other health
	// figures are plain rows.
	healthCollector struct{}
	// migCollector: the MIG devices of a GPU in MIG mode (mig.go).
	migCollector struct {
		devices []*migDevice
		// mu guards devices against Inventory: the reads that change
		// devices run under the device's use.
		mu sync.Mutex
		// listedAt is when the layout was last read, by the device clock;
		// stale says a MIG device answered as destroyed since.
		listedAt time.Time
		stale    bool
		// retired holds the GPM samples of MIG devices gone while the
		// GPM gate was held: freed at Close.
		retired []*migDevice
	}
	// counterState, the counters read on their own cadence (counters.go),
	// is the last collector.
)

func (*getterCollector) prime(*Device)  {}
func (*processCollector) prime(*Device) {}
func (*fieldCollector) prime(*Device)   {}
func (*healthCollector) prime(*Device)  {}
func (*counterState) prime(*Device)     {}

// newCollectors gives d its collectors.
func (d *Device) newCollectors() {
	d.parts.gpm, d.parts.util, d.parts.procs, d.parts.mig, d.parts.counters = &gpmCollector{}, &utilizationCollector{}, &processCollector{}, &migCollector{}, &counterState{}
	d.parts.list = []collector{d.parts.gpm, d.parts.util, &getterCollector{}, d.parts.procs, &fieldCollector{}, &healthCollector{}, d.parts.mig, d.parts.counters}
}
