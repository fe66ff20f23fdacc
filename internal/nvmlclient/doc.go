// Package nvmlclient is the only code that calls NVML.
//
// It is built on an injected nvml.Interface, so tests run on go-nvml's mocks
// and production on nvml.New(nvml.WithLibraryPath(...)). To follow one GPU
// sample from NVML to the receiver:
//
//   - client.go opens NVML (and says why it cannot), inventory.go takes the
//     inventory, symbols.go checks which newer entry points the library has;
//   - device.go reads one Sample per GPU per scrape: memory, power, clocks,
//     with NOT_SUPPORTED answers cached per call (calls.go names them);
//   - fields.go reads field values (the memory's temperature);
//   - sampling.go averages the utilization samples since the previous read;
//   - processes.go lists processes with their windowed utilization;
//   - gpm.go computes GPM activity and traffic over the window;
//   - health.go reads ECC, row remapping, clock events and PCIe;
//   - mig.go lists MIG devices and reads each, a GPU instance's memory and
//     GPM once, on its first compute instance;
//   - events.go waits for XID and ECC events in the background.
//
// The receiver turns Samples into pdata; no go-nvml type leaves this package.
package nvmlclient // import "github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient"
