// Package nvmlclient is the only code that calls NVML.
//
// It is built on an injected nvml.Interface, so tests run on go-nvml's mocks
// and production on nvml.New(nvml.WithLibraryPath(...)). A Client opens NVML
// and takes the inventory (inventory.go); each Device then reads one Sample
// per scrape (device.go), with windowed utilization (sampling.go). The
// receiver turns Samples into pdata; no go-nvml type leaves this package.
package nvmlclient // import "github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient"
