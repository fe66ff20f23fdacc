// Package raw makes the NVML list calls that go-nvml wraps without a
// bound, directly through the library go-nvml loaded: the process lists
// and the process utilization samples, with bounded buffers and attempts.
// It needs cgo, and imports nothing of nvmlclient.
package raw
