//go:build cgo

package collect

import (
	"fmt"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient/call"
	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient/sample"
)

// A GPU is read through a list of collectors, each one part of the read
// that owns that part's state: its baselines, its windows, what it carries
// from one read to the next. No collector reads another's state, nor what
// another wrote into the Sample: what several need is decided before they
// run (the GPU's call.Plan, the reading's scrapeInput), and the one reading
// made of two collectors' answers (a MIG device's processes from the
// parent's list) is joined after them (Set.Read). So the order of the list
// carries no data (TestCollectorOrderCarriesNoData). Set.Read runs them on
// one reading, whose call.Reading alone makes NVML calls; a panic in one
// collector's own code fails that collector alone.
type Collector interface {
	// baseline takes the collector's baselines, once, before the first read.
	baseline(d *call.GPU)
	// read fills the part's readings of s.
	read(r *reading, s *sample.Sample)
}

// The collectors, each in its own file with its plan, state and read:
// activityCollector (activity.go), getterCollector (getters.go),
// processCollector (processes.go), fieldCollector (fields.go),
// healthCollector (health.go), migCollector (mig.go) and counterState
// (counters.go).

// Set is one GPU's collectors: List, as a read runs them, and by name
// those that Configure, the share sampler, Inventory or Close reach.
type Set struct {
	List     []Collector
	activity *activityCollector
	procs    *processCollector
	mig      *migCollector
	counters *counterState
}

// New returns a GPU's collectors.
func New() *Set {
	s := &Set{activity: &activityCollector{}, procs: &processCollector{}, mig: &migCollector{}, counters: &counterState{}}
	s.List = []Collector{s.activity, &getterCollector{}, s.procs, &fieldCollector{}, &healthCollector{}, s.mig, s.counters}
	return s
}

// Options are what the client's options ask of the collectors.
type Options struct {
	Processes             bool          // list the processes (WithProcesses)
	MemoryControllerOnGPM bool          // the memory controller window on GPUs with GPM too
	CounterInterval       time.Duration // the cadence of the costly rows
}

// Configure applies o.
func (s *Set) Configure(o Options) {
	s.activity.memCtrlOnGPM = o.MemoryControllerOnGPM
	s.procs.on = o.Processes
	s.mig.processes = o.Processes
	s.counters.interval = o.CounterInterval
}

// TakeBaselines takes every collector's baselines; d's GPM plan is
// probed already (call.GPU.ProbeGPM).
func (s *Set) TakeBaselines(d *call.GPU) {
	for _, c := range s.List {
		c.baseline(d)
	}
}

// Read runs every collector on one reading of d into smp, and returns the
// reading: what failed, and whether the GPU was found lost.
func (s *Set) Read(d *call.GPU, smp *sample.Sample) *call.Reading {
	r := &reading{Reading: call.Reading{GPU: d}, in: scrapeInput{migMode: s.mig.count() > 0}}
	for _, c := range s.List {
		if r.Lost {
			break
		}
		r.guard(c, smp)
	}
	joinParentProcesses(smp, r.fromParent)
	return &r.Reading
}

// Release frees what taking the baselines allocated in NVML (GPM samples).
func (s *Set) Release() {
	s.activity.gpm.free()
	for _, m := range append(s.mig.devices, s.mig.retired...) {
		m.gpm.free()
	}
}

// MIGDevices lists the MIG devices, as the reads last listed them.
func (s *Set) MIGDevices() []sample.MIGInfo { return s.mig.infos() }

// Processes says the processes are listed (WithProcesses).
func (s *Set) Processes() bool { return s.procs.on }

// SharesDue says a share sample between reads is due: the newest read
// listed a process (the share of an empty GPU is nobody's), and the newest
// sample is at least most of interval old.
func (s *Set) SharesDue(now time.Time, interval time.Duration) bool {
	return s.procs.listed.Load() && s.procs.shares.due(now, interval)
}

// SampleShares takes one sample of the processes' shares between reads
// on r; it reports whether one was taken.
func (s *Set) SampleShares(r *call.Reading) bool { return s.procs.sampleShares(r) }

// reading is one read of the collectors: its calls (call.Reading), and
// what the read decided before they ran and joins after them.
type reading struct {
	call.Reading
	in scrapeInput
	// fromParent lists the Sample's MIG devices whose processes come from
	// the parent's list, joined once every collector has run.
	fromParent []int
}

// scrapeInput is what a read decides before its collectors run, the same
// for all of them and read only: a collector never looks at another's
// state.
type scrapeInput struct {
	// migMode says the GPU had MIG devices when the read began.
	migMode bool
}

// guard runs one collector; a panic outside any NVML call (in our own
// decoding) fails that collector alone.
func (r *reading) guard(c Collector, s *sample.Sample) {
	defer func() {
		if p := recover(); p != nil {
			r.GPU.CountPanic(p)
			r.Fail(call.None, nvml.ERROR_UNKNOWN, fmt.Sprintf("panic in NVML read: %v", p))
		}
	}()
	c.read(r, s)
}
