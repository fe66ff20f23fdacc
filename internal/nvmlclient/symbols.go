package nvmlclient

import "github.com/NVIDIA/go-nvml/pkg/nvml"

// symbols records which newer NVML entry points the loaded library has.
// Calling a symbol the driver lacks kills the process, so each newer API is
// looked up once per Open before it is used.
type symbols struct {
	memoryInfoV2 bool
	gpm          bool
	mig          bool
	missing      map[call]bool // calls whose symbol the library lacks
}

func lookupSymbols(lib nvml.Interface) (s symbols) {
	defer func() {
		// A library without the extension interface has none of them.
		if recover() != nil {
			s = symbols{}
		}
	}()
	ext := lib.Extensions()
	if ext == nil {
		return s
	}
	s.memoryInfoV2 = ext.LookupSymbol("nvmlDeviceGetMemoryInfo_v2") == nil
	s.gpm = ext.LookupSymbol("nvmlGpmMetricsGet") == nil && ext.LookupSymbol("nvmlGpmQueryDeviceSupport") == nil
	s.mig = ext.LookupSymbol("nvmlDeviceGetMigMode") == nil && ext.LookupSymbol("nvmlDeviceGetMigDeviceHandleByIndex") == nil
	for c, spec := range readTable {
		if name := spec.symbol; name != "" && !hasAnyVersion(ext, name) {
			if s.missing == nil {
				s.missing = map[call]bool{}
			}
			s.missing[call(c)] = true
		}
	}
	return s
}

// hasAnyVersion reports whether the library has name or one of its
// versioned forms (name_v2, name_v3), whichever go-nvml will call.
func hasAnyVersion(ext nvml.ExtendedInterface, name string) bool {
	for _, n := range []string{name, name + "_v2", name + "_v3"} {
		if ext.LookupSymbol(n) == nil {
			return true
		}
	}
	return false
}
