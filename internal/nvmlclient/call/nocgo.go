//go:build !cgo

package call

// returnCode is the NVML return code an Error keeps; without cgo no call
// is ever made.
type returnCode int32
