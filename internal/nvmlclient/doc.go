// Package nvmlclient is the only code that calls NVML, and the receiver's
// one entry point to it.
//
// It is built on an injected nvml.Interface, so tests run on go-nvml's mocks
// and production on nvml.New(nvml.WithLibraryPath(...)). What it hands out
// (Sample, DeviceInfo, Event, the errors) holds no go-nvml type. Its
// packages, lowest first; each imports only those below it
// (TestPackagesImportOnlyDownward):
//
//   - sample: what a read gives (Sample, sample/sample.go) and what can
//     be asked for (Reading, Readings: the readings with readers of their
//     own, sample/readings.go); guard: the order of a session's calls (the lane,
//     the GPM gate, a device's one use, the calls in flight that Close
//     waits for); raw: the list calls with bounded buffers (raw/raw.go);
//   - call: the read table (call/table.go: the rows with readers of their
//     own, then the client's plain reads; each row says its reader, its
//     collector's code, a getter, a field of the batch or a sample window), the one way an NVML call is made (call/reading.go),
//     and what the calls answered (call/gpu.go: the support cache of
//     call/support.go, the failures logged once of call/logcalls.go, the
//     timings, the panics of call/panics.go); call/symbols.go checks which
//     newer entry points the library has, call/listcalls.go makes the list
//     calls;
//   - collect: the collectors, one file each with its type, plan, state
//     and read (collect/collectors.go lists them): activity (GPM and the
//     utilization windows), getters, processes, fields, health, MIG and
//     the counters, read on their own cadence off the scrape path;
//   - this package: client.go opens NVML (library.go refuses a library that
//     is missing or not NVML before nvmlInit), inventory.go takes the
//     inventory (info.go) and makes one Device per GPU; device.go takes
//     each GPU's baselines, then reads one Sample per GPU per scrape
//     through its collectors; shares.go samples the processes' shares
//     between reads, stats.go sums the calls' timings; events.go waits for
//     XID and ECC events (event.go) in the background; reads.go and
//     reads_cgo.go make the plain reads the receiver declares, options.go
//     the options (WithReads among them); readings.go gives the receiver
//     package sample's names as its own. No two of its files use each other
//     (TestRootFilesUseEachOtherOneWay).
//
// go-nvml needs cgo. A build without it gets nocgo.go instead: a Client
// whose Open reports NVML as unavailable, so that the rest of the
// collector builds and runs everywhere.
package nvmlclient // import "github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient"
