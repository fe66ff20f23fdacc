//go:build cgo

package nvmlclient

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
