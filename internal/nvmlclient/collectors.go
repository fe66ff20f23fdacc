//go:build cgo

package nvmlclient

import (
	"sync"
	"sync/atomic"
	"time"
)

// A Device reads its GPU through a list of collectors, each one part of
// the read that owns that part's state: its baselines, its windows, what
// it carries from one read to the next. No collector reads another's
// state, nor what another wrote into the Sample: what several need is
// decided before they run (the readPlan, the reading's scrapeInput), and
// the one figure made of two collectors' answers (a MIG device's processes
// from the parent's list) is joined after them (Read). So the order of the
// list carries no data (TestCollectorOrderCarriesNoData). Read runs them
// on one reading (reading.go), which alone makes NVML calls; a panic in one
// collector's own code fails that collector alone.
type collector interface {
	// prime takes the part's baselines, once, before the first read.
	prime(d *Device)
	// read fills the part's figures of s.
	read(r *reading, s *Sample)
}

// The collectors.
type (
	// activityCollector: GPM's activity and traffic, and the engines'
	// and memory controller's utilization, over the window since the
	// previous read (activity.go).
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
		processes bool // WithProcesses
		devices   []*migDevice
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
	d.parts.activity, d.parts.procs, d.parts.mig, d.parts.counters = &activityCollector{}, &processCollector{}, &migCollector{}, &counterState{}
	d.parts.list = []collector{d.parts.activity, &getterCollector{}, d.parts.procs, &fieldCollector{}, &healthCollector{}, d.parts.mig, d.parts.counters}
}
