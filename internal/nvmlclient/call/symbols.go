//go:build cgo

package call

import "github.com/NVIDIA/go-nvml/pkg/nvml"

// Symbols records which newer NVML entry points the loaded library has.
// Calling a symbol the driver lacks kills the process, so each newer API is
// looked up once per Open before it is used.
type Symbols struct {
	MemoryInfoV2 bool
	GPM          bool
	MIG          bool
	missing      map[ID]bool // calls whose symbol the library lacks
}

// LookupSymbols looks up lib's newer entry points, and the symbol of every
// row of t that names one.
func LookupSymbols(lib nvml.Interface, t Table) (s Symbols) {
	defer func() {
		// A library without the extension interface has none of them.
		if recover() != nil {
			s = Symbols{}
		}
	}()
	ext := lib.Extensions()
	if ext == nil {
		return s
	}
	s.MemoryInfoV2 = ext.LookupSymbol("nvmlDeviceGetMemoryInfo_v2") == nil
	s.GPM = ext.LookupSymbol("nvmlGpmMetricsGet") == nil && ext.LookupSymbol("nvmlGpmQueryDeviceSupport") == nil
	s.MIG = ext.LookupSymbol("nvmlDeviceGetMigMode") == nil && ext.LookupSymbol("nvmlDeviceGetMigDeviceHandleByIndex") == nil
	for c, spec := range t {
		if name := spec.Symbol; name != "" && !HasAnyVersion(ext, name) {
			if s.missing == nil {
				s.missing = map[ID]bool{}
			}
			s.missing[ID(c)] = true
		}
	}
	return s
}

// HasAnyVersion reports whether the library has name or one of its
// versioned forms (name_v2, name_v3), whichever go-nvml will call.
func HasAnyVersion(ext nvml.ExtendedInterface, name string) bool {
	for _, n := range []string{name, name + "_v2", name + "_v3"} {
		if ext.LookupSymbol(n) == nil {
			return true
		}
	}
	return false
}
