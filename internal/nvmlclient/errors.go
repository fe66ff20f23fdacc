package nvmlclient

import (
	"errors"
	"fmt"
	"strings"

	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient/call"
	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient/guard"
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
// readings that call feeds are left out of the sample. Its message names
// NVML's return code; the code itself stays in package call.
type CallError = call.Error

// ReadError is returned beside a sample that lacks the readings of the
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

// UnavailableError says why NVML could not be used and how to fix it.
type UnavailableError struct {
	Cause string
	Fix   string
	Err   error
}

func (e *UnavailableError) Error() string {
	return fmt.Sprintf("NVML unavailable: %s (%s)", e.Cause, e.Fix)
}

func (e *UnavailableError) Unwrap() error { return e.Err }

// ErrNotOpen is returned when the client is used before a successful Open.
var ErrNotOpen = errors.New("NVML is not initialized")

// InFlightError says that Close left NVML initialized because calls were
// still running inside it (guard.InFlightError).
type InFlightError = guard.InFlightError

// IsInFlight reports whether err is an InFlightError.
func IsInFlight(err error) bool { return guard.IsInFlight(err) }
