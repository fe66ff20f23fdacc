package nvmlclient

import (
	"errors"
	"fmt"

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

// CallError is an unexpected NVML error on one call of one device. The whole
// sample of that device is dropped for this scrape.
type CallError struct {
	Call string
	Ret  nvml.Return
}

func (e *CallError) Error() string { return fmt.Sprintf("%s: %v", e.Call, e.Ret) }

// outcome classifies what an NVML return code means for a reading.
type outcome int

const (
	outcomeOK          outcome = iota
	outcomeUnsupported         // skip this reading on this device from now on
	outcomeLost                // the GPU fell off the bus
	outcomeFailed              // drop this device's sample for this scrape
)

func classify(ret nvml.Return) outcome {
	switch ret {
	case nvml.SUCCESS:
		return outcomeOK
	case nvml.ERROR_NOT_SUPPORTED, nvml.ERROR_FUNCTION_NOT_FOUND, nvml.ERROR_NO_PERMISSION:
		// NO_PERMISSION does not heal without a restart with other rights, so
		// it is treated like a missing feature rather than retried each scrape.
		return outcomeUnsupported
	case nvml.ERROR_GPU_IS_LOST:
		return outcomeLost
	default:
		return outcomeFailed
	}
}
