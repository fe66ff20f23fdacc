package nvmlreceiver

import (
	"errors"
	"sort"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.uber.org/zap"

	"github.com/otelcol-nvml/otelcol-nvml/internal/attribution"
	"github.com/otelcol-nvml/otelcol-nvml/receiver/nvmlreceiver/internal/metadata"
)

// containerCPU records container.cpu.time and nvidia.gpu.container.cpu.limit for each
// container that holds a GPU, from its cgroup: the CPU beside the GPU, so
// that an input-bound job shows as such. It is used from the scrape
// goroutine only.
type containerCPU struct {
	logger *zap.Logger
	reader *attribution.CgroupCPUReader
	warned map[string]bool // per container id: its read failed once
}

// gpuContainer is a container with a GPU process in it.
type gpuContainer struct {
	owner owner
	pid   int
}

// containersOf adds the containers of a GPU's processes (and its MIG
// devices' processes) to seen, by container id.
func containersOf(r gpuReport, seen map[string]gpuContainer) {
	add := func(procs []ownedProcess) {
		for _, p := range procs {
			id := p.owner.ContainerID
			if id == "" {
				continue // a host process: the host's CPU (host_metrics) covers it
			}
			if c, ok := seen[id]; !ok || c.owner.PodName == "" && p.owner.PodName != "" {
				seen[id] = gpuContainer{owner: p.owner, pid: int(p.PID)}
			}
		}
	}
	add(r.processes)
	for _, m := range r.migs {
		add(m.processes)
	}
}

// record reads each container's cgroup and records its CPU on a resource of
// the container (and its pod).
func (c *containerCPU) record(mb *metadata.MetricsBuilder, ts pcommon.Timestamp, containers map[string]gpuContainer) {
	ids := make([]string, 0, len(containers))
	for id := range containers {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		ctr := containers[id]
		cpu, err := c.reader.Read(ctr.pid)
		if err != nil {
			if !errors.Is(err, attribution.ErrProcessNotFound) && !c.warned[id] {
				c.warned[id] = true
				c.logger.Warn("Cannot read the CPU of a container that holds a GPU; container.cpu.time is left out for it",
					zap.String("container.id", id), zap.Error(err))
			}
			continue
		}
		mb.RecordContainerCPUTimeDataPoint(ts, cpu.UsageSeconds)
		if cpu.LimitCores > 0 {
			mb.RecordNvidiaGpuContainerCPULimitDataPoint(ts, cpu.LimitCores)
		}
		rb := mb.NewResourceBuilder()
		rb.SetContainerID(id)
		for _, a := range []struct {
			v   string
			set func(string)
		}{
			{ctr.owner.PodUID, rb.SetK8sPodUID},
			{ctr.owner.PodName, rb.SetK8sPodName},
			{ctr.owner.Namespace, rb.SetK8sNamespaceName},
			{ctr.owner.ContainerName, rb.SetK8sContainerName},
		} {
			if a.v != "" {
				a.set(a.v)
			}
		}
		mb.EmitForResource(metadata.WithResource(rb.Emit()))
	}
}
