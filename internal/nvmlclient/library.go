//go:build cgo

package nvmlclient

import (
	"fmt"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/dl"
)

// defaultLibrary is what the loader searches for when library_path is empty.
const defaultLibrary = "libnvidia-ml.so.1"

// requiredSymbols are the entry points called before any symbol check:
// nvmlInit and the inventory. Every driver this receiver supports has them.
var requiredSymbols = []string{
	"nvmlInit_v2", "nvmlShutdown", "nvmlErrorString", "nvmlSystemGetDriverVersion",
	"nvmlDeviceGetCount_v2", "nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetUUID",
}

// checkLibrary loads the library at path (the loader's search for
// libnvidia-ml.so.1 when empty) on its own, privately, and checks that it is
// NVML before go-nvml loads it for good and calls nvmlInit in it.
func checkLibrary(path string) error {
	name := path
	if name == "" {
		name = defaultLibrary
	}
	lib := dl.New(name, dl.RTLD_LAZY|dl.RTLD_LOCAL)
	if err := lib.Open(); err != nil {
		fix := "is the NVIDIA driver installed, and mounted into the container (NVIDIA container toolkit)? " +
			"Set library_path to the library's full path if it is outside the loader's search path"
		if path != "" {
			fix = "check library_path: it must name libnvidia-ml.so.1 of the installed driver; the receiver retries on its own"
		}
		return &UnavailableError{Cause: fmt.Sprintf("cannot load %s: %v", name, err), Fix: fix, Err: errLibraryNotFound}
	}
	defer func() { _ = lib.Close() }()
	var missing []string
	for _, sym := range requiredSymbols {
		if lib.Lookup(sym) != nil {
			missing = append(missing, sym)
		}
	}
	if len(missing) > 0 {
		return &UnavailableError{
			Cause: fmt.Sprintf("%s is not an NVML library: it lacks %s", name, strings.Join(missing, ", ")),
			Fix:   "set library_path to libnvidia-ml.so.1 of the installed NVIDIA driver",
			Err:   errNotNVML,
		}
	}
	return nil
}
