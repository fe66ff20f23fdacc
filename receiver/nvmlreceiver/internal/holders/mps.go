package holders

import (
	"github.com/otelcol-nvml/otelcol-nvml/internal/attribution"
	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient"
)

// CUDA MPS (docs/design/waste.md, "MPS"): the server runs every client's
// kernels, and NVML samples only the server. So the server is
// infrastructure, never a holder: it has no GPU-time counters, does not
// make the device held, and is never its owner. A client holds the device;
// its busy and idle time are even parts of the clients' (collect/processes.go
// leaves its own utilization absent).

// markMPS marks the MPS server among procs also by its executable name
// (nvmlclient knows it from the lists only where it is the one compute
// process besides the clients), and returns the device's owner found
// without the server, where one is there: the device plugin's MPS daemon
// pod runs the server, and would otherwise make every MPS GPU shared with
// it, or its own.
func markMPS(a *attribution.Attributor, deviceID string, procs []Process, deviceOwner attribution.Owner) attribution.Owner {
	var pids, kept []int
	server := false
	for i := range procs {
		p := &procs[i]
		if p.MPS == nvmlclient.MPSNone && p.InfoOK && p.Info.ExecutableName == nvmlclient.MPSServerName {
			p.MPS = nvmlclient.MPSServer
		}
		if p.MPS == nvmlclient.MPSServer {
			server = true
			continue
		}
		pids, kept = append(pids, int(p.PID)), append(kept, i)
	}
	if !server {
		return deviceOwner
	}
	who, o := a.Attribute(deviceID, pids)
	for j, i := range kept {
		procs[i].Owner = who[j].Owner
	}
	return o
}

// Count counts the processes that hold the device: all but the MPS
// server.
func Count(procs []Process) int {
	n := 0
	for _, p := range procs {
		if p.MPS != nvmlclient.MPSServer {
			n++
		}
	}
	return n
}

// Shared says the device is shared through MPS: a server or a client on
// it (nvidia.gpu.sharing = "mps").
func Shared(procs []Process) bool {
	for _, p := range procs {
		if p.MPS != nvmlclient.MPSNone {
			return true
		}
	}
	return false
}

// Role is a process's nvidia.gpu.process.mps value; "" outside MPS.
func Role(r nvmlclient.MPSRole) string {
	switch r {
	case nvmlclient.MPSServer:
		return "server"
	case nvmlclient.MPSClient:
		return "client"
	}
	return ""
}
