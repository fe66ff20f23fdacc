//go:build !cgo

package record

// Without cgo nothing is read (nvmlclient reports NVML unavailable), and the
// readings, which name go-nvml's getters, are not built.
var plainReadings []Reading
