package nvmlclient

import (
	"errors"
	"fmt"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// ErrGPULost is returned by Device.Read once NVML has said the GPU is lost.
var ErrGPULost = errors.New("GPU is lost")

// errLibraryNotFound and errNotNVML are the causes of a library refused
// before nvmlInit.
var (
	errLibraryNotFound = errors.New("NVML library not found")
	errNotNVML         = errors.New("not an NVML library")
)

// ErrBusy is returned by Device.Read while an earlier read of the same GPU
// is still running (a slow or hung NVML call).
var ErrBusy = errors.New("an earlier read of this GPU is still running")

// CallError is an unexpected NVML error on one call of one device: the
// figures that call feeds are left out of the sample.
type CallError struct {
	Call   string
	Ret    nvml.Return
	Detail string // e.g. the panic a call raised
	call   call
}

func (e *CallError) Error() string {
	if e.Detail != "" {
		return fmt.Sprintf("%s: %s", e.Call, e.Detail)
	}
	return fmt.Sprintf("%s: %v", e.Call, e.Ret)
}

// ReadError is returned beside a sample that lacks the figures of the
// calls that failed: the rest of the sample holds.
type ReadError struct {
	Calls []*CallError
	// Metrics counts the enabled metrics the failed calls feed: the points
	// a scrape leaves out (scrapererror.NewPartialScrapeError).
	Metrics int
}

func (e *ReadError) Error() string {
	parts := make([]string, len(e.Calls))
	for i, c := range e.Calls {
		parts[i] = c.Error()
	}
	return fmt.Sprintf("%d NVML call(s) failed, %d metric(s) left out: %s", len(e.Calls), e.Metrics, strings.Join(parts, "; "))
}

func (e *ReadError) Unwrap() []error {
	out := make([]error, len(e.Calls))
	for i, c := range e.Calls {
		out[i] = c
	}
	return out
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
