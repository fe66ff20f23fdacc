// Package nvmlclient is the only code that calls NVML.
//
// It is built on an injected nvml.Interface, so tests run on go-nvml's mocks
// and production on nvml.New(nvml.WithLibraryPath(...)). What it hands out
// (Sample, DeviceInfo, Event, the errors) holds no go-nvml type. To follow
// one GPU sample from NVML to the receiver:
//
//   - client.go opens NVML (and says why it cannot; library.go refuses a
//     library that is missing or not NVML before nvmlInit), inventory.go
//     takes the inventory (info.go), call/symbols.go checks which newer entry
//     points the library has, prime.go takes each GPU's baselines;
//   - guard/inflight.go counts the calls inside NVML, so that Close never shuts
//     NVML down under one; call/panics.go recovers a read that panics;
//     raw/raw.go and call/listcalls.go make the list calls with bounded
//     buffers;
//   - call/table.go and call/plain.go are the read table: each NVML call, the figures
//     it answers (call/plain.go: one row per plain figure, whose constant
//     figure/figures_gen.go is generated from it); call/support.go caches NOT_SUPPORTED
//     answers, for a while; call/reading.go is one read's bookkeeping;
//   - device.go reads one Sample (figure/sample.go) per GPU per scrape through its
//     collectors (collectors.go), each in one file with its plan, state and
//     read: activity.go (GPM's activity and traffic over the window,
//     gpm.go, and the utilization samples since the previous read,
//     sampling.go), getters.go (the memory and the plain getters),
//     processes.go (processes with NVML's newest utilization sample of
//     each), fields.go (the field-value batch), health.go (row remapping),
//     mig.go (lists MIG devices and reads each);
//   - counters.go reads the costly rows (energy, violation time, the PCIe
//     throughput) on their own cadence, off the scrape path; call/stats.go times
//     every call;
//   - events.go waits for XID and ECC events (event.go) in the background.
//
// go-nvml needs cgo. A build without it gets nocgo.go instead: a Client
// whose Open reports NVML as unavailable, so that the rest of the
// collector builds and runs everywhere.
package nvmlclient // import "github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient"
