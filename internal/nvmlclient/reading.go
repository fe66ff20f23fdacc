//go:build cgo

package nvmlclient

import (
	"fmt"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// reading is the state of one Read: what failed, and whether the GPU was
// found lost. Every NVML call of a read goes through call (or do), which
// alone decides whether the call is made, times it and classifies its
// answer.
type reading struct {
	d        *Device
	in       scrapeInput
	failed   []*CallError
	lost     bool
	lostCall call
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

// available reports whether c is to be made now: a metric it feeds is
// enabled, its answer is not cached as unsupported, and the GPU is not lost.
func (r *reading) available(c call) bool {
	return !r.lost && r.d.plan.wanted[c] && r.d.book.support.usable(c, r.d.plan.now())
}

// call makes c through fn when it is available, and times it. A panic in
// fn (in go-nvml or a mock) is the call's failure, not the read's. made is
// false when the call was not made.
func (r *reading) call(c call, fn func() nvml.Return) (ret nvml.Return, made bool) {
	if !r.available(c) {
		return 0, false
	}
	start := time.Now()
	defer func() {
		r.d.book.stats[c].observe(time.Since(start))
		if p := recover(); p != nil {
			r.d.countPanic(p)
			r.fail(c, nvml.ERROR_UNKNOWN, fmt.Sprintf("panic: %v", p))
			ret, made = panicked, true
		}
	}()
	return fn(), true
}

// panicked marks a call whose panic was already recorded by call.
const panicked nvml.Return = -1

// result classifies c's answer and records what a failure means. It
// reports whether ret is a success.
func (r *reading) result(c call, ret nvml.Return) bool {
	switch {
	case ret == panicked:
		return false
	case ret == nvml.SUCCESS:
		r.d.book.support.supported(c)
		r.d.answeredAgain(c)
		return true
	}
	switch classify(ret) {
	case outcomeUnsupported:
		r.d.book.support.unsupported(c, ret, r.d.plan.now())
	case outcomeLost:
		if !r.lost {
			r.lost, r.lostCall = true, c
		}
	default:
		r.fail(c, ret, "")
	}
	return false
}

// do makes c through fn, when available, and reports whether it succeeded.
func (r *reading) do(c call, fn func() nvml.Return) bool {
	ret, made := r.call(c, fn)
	return made && r.result(c, ret)
}

func (r *reading) fail(c call, ret nvml.Return, detail string) {
	for _, f := range r.failed {
		if f.call == c {
			return
		}
	}
	r.failed = append(r.failed, &CallError{Call: c.String(), Detail: detail, ret: ret, call: c})
}

// guard runs one collector; a panic outside any NVML call (in our own
// decoding) fails that collector alone.
func (r *reading) guard(c collector, s *Sample) {
	defer func() {
		if p := recover(); p != nil {
			r.d.countPanic(p)
			r.fail(callNone, nvml.ERROR_UNKNOWN, fmt.Sprintf("panic in NVML read: %v", p))
		}
	}()
	c.read(r, s)
}

// outcome classifies what an NVML return code means for a reading.
type outcome int

const (
	outcomeOK          outcome = iota
	outcomeUnsupported         // cached, re-probed with a backoff (support.go)
	outcomeLost                // the GPU fell off the bus
	outcomeFailed              // drop the figures of this call for this scrape
)

func classify(ret nvml.Return) outcome {
	switch ret {
	case nvml.SUCCESS:
		return outcomeOK
	case nvml.ERROR_NOT_SUPPORTED, nvml.ERROR_FUNCTION_NOT_FOUND, nvml.ERROR_NO_PERMISSION:
		// NO_PERMISSION rarely heals without new rights, so it is cached
		// like a missing feature; the backoff re-probes it anyway.
		return outcomeUnsupported
	case nvml.ERROR_GPU_IS_LOST:
		return outcomeLost
	default:
		return outcomeFailed
	}
}

// returnCode is NVML's return code, as CallError keeps it.
type returnCode = nvml.Return
