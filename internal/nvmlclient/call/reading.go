//go:build cgo

package call

import (
	"fmt"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// Reading is the state of one read of a GPU: what failed, and whether the
// GPU was found lost. Every NVML call of a read goes through Call (or Do),
// which alone decides whether the call is made, times it and classifies
// its answer.
type Reading struct {
	GPU      *GPU
	Failed   []*Error
	Lost     bool
	LostCall ID
}

// Available reports whether c is to be made now: a metric it feeds is
// enabled, its answer is not cached as unsupported, and the GPU is not lost.
func (r *Reading) Available(c ID) bool {
	return !r.Lost && r.GPU.Plan.Wanted[c] && r.GPU.record.support.usable(c, r.GPU.Plan.Now())
}

// Call makes c through fn when it is available, and times it. A panic in
// fn (in go-nvml or a mock) is the call's failure, not the read's. made is
// false when the call was not made.
func (r *Reading) Call(c ID, fn func() nvml.Return) (ret nvml.Return, made bool) {
	if !r.Available(c) {
		return 0, false
	}
	start := time.Now()
	defer func() {
		r.GPU.record.stats[c].observe(time.Since(start))
		if p := recover(); p != nil {
			r.GPU.CountPanic(p)
			r.Fail(c, nvml.ERROR_UNKNOWN, fmt.Sprintf("panic: %v", p))
			ret, made = panicked, true
		}
	}()
	return fn(), true
}

// panicked marks a call whose panic was already recorded by Call.
const panicked nvml.Return = -1

// Result classifies c's answer and records what a failure means. It
// reports whether ret is a success.
func (r *Reading) Result(c ID, ret nvml.Return) bool {
	switch {
	case ret == panicked:
		return false
	case ret == nvml.SUCCESS:
		r.GPU.record.support.supported(c)
		r.GPU.answeredAgain(c)
		return true
	}
	switch Classify(ret) {
	case OutcomeUnsupported:
		r.GPU.record.support.unsupported(c, ret, r.GPU.Plan.Now())
	case OutcomeLost:
		if !r.Lost {
			r.Lost, r.LostCall = true, c
		}
	default:
		r.Fail(c, ret, "")
	}
	return false
}

// Do makes c through fn, when available, and reports whether it succeeded.
func (r *Reading) Do(c ID, fn func() nvml.Return) bool {
	ret, made := r.Call(c, fn)
	return made && r.Result(c, ret)
}

// Fail records that c failed with ret, once per reading.
func (r *Reading) Fail(c ID, ret nvml.Return, detail string) {
	for _, f := range r.Failed {
		if f.id == c {
			return
		}
	}
	r.Failed = append(r.Failed, &Error{Call: r.GPU.Table.Name(c), Detail: detail, ret: ret, id: c})
}

// Carry records e, a failure of another reading of the GPU (the counters'
// background read), as this reading's.
func (r *Reading) Carry(e *Error) { r.Fail(e.id, e.ret, e.Detail) }

// Outcome classifies what an NVML return code means for a reading.
type Outcome int

const (
	OutcomeOK          Outcome = iota
	OutcomeUnsupported         // cached, re-probed with a backoff (support.go)
	OutcomeLost                // the GPU fell off the bus
	OutcomeFailed              // drop the readings of this call for this scrape
)

// Classify says what ret means for a reading.
func Classify(ret nvml.Return) Outcome {
	switch ret {
	case nvml.SUCCESS:
		return OutcomeOK
	case nvml.ERROR_NOT_SUPPORTED, nvml.ERROR_FUNCTION_NOT_FOUND, nvml.ERROR_NO_PERMISSION:
		// NO_PERMISSION rarely heals without new rights, so it is cached
		// like a missing feature; the backoff re-probes it anyway.
		return OutcomeUnsupported
	case nvml.ERROR_GPU_IS_LOST:
		return OutcomeLost
	default:
		return OutcomeFailed
	}
}

// returnCode is NVML's return code, as Error keeps it.
type returnCode = nvml.Return
