//go:build cgo

package nvmlclient

import (
	"fmt"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient/call"
)

// A Device reads its GPU through a list of collectors, each one part of
// the read that owns that part's state: its baselines, its windows, what
// it carries from one read to the next. No collector reads another's
// state, nor what another wrote into the Sample: what several need is
// decided before they run (the GPU's Plan, the reading's scrapeInput), and
// the one figure made of two collectors' answers (a MIG device's processes
// from the parent's list) is joined after them (Read). So the order of the
// list carries no data (TestCollectorOrderCarriesNoData). Read runs them
// on one reading, whose call.Reading alone makes NVML calls; a panic in
// one collector's own code fails that collector alone.
type collector interface {
	// prime takes the part's baselines, once, before the first read.
	prime(d *call.GPU)
	// read fills the part's figures of s.
	read(r *reading, s *Sample)
}

// The collectors, each in its own file with its plan, state and read:
// activityCollector (activity.go), getterCollector (getters.go),
// processCollector (processes.go), fieldCollector (fields.go),
// healthCollector (health.go), migCollector (mig.go) and counterState
// (counters.go).

// newCollectors gives d its collectors.
func (d *Device) newCollectors() {
	d.parts.activity, d.parts.procs, d.parts.mig, d.parts.counters = &activityCollector{}, &processCollector{}, &migCollector{}, &counterState{}
	d.parts.list = []collector{d.parts.activity, &getterCollector{}, d.parts.procs, &fieldCollector{}, &healthCollector{}, d.parts.mig, d.parts.counters}
}

// reading is one read of the collectors: its calls (call.Reading), and
// what the read decided before they ran and joins after them.
type reading struct {
	*call.Reading
	in scrapeInput
	// fromParent lists the Sample's MIG devices whose processes come from
	// the parent's list, joined once every collector has run.
	fromParent []int
}

// scrapeInput is what a Read decides before its collectors run, the same
// for all of them and read only: a collector never looks at another's
// state.
type scrapeInput struct {
	// migMode says the GPU had MIG devices when the read began.
	migMode bool
}

// scrapeInput decides a Read's input.
func (d *Device) scrapeInput() scrapeInput {
	return scrapeInput{migMode: d.parts.mig.count() > 0}
}

// guard runs one collector; a panic outside any NVML call (in our own
// decoding) fails that collector alone.
func (r *reading) guard(c collector, s *Sample) {
	defer func() {
		if p := recover(); p != nil {
			r.GPU.CountPanic(p)
			r.Fail(call.None, nvml.ERROR_UNKNOWN, fmt.Sprintf("panic in NVML read: %v", p))
		}
	}()
	c.read(r, s)
}
