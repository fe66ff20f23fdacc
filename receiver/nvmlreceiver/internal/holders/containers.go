package holders

import (
	"errors"
	"sort"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.uber.org/zap"

	"github.com/otelcol-nvml/otelcol-nvml/internal/attribution"
	"github.com/otelcol-nvml/otelcol-nvml/internal/logonce"
	"github.com/otelcol-nvml/otelcol-nvml/receiver/nvmlreceiver/internal/metadata"
)

// Containers records container.cpu.time and nvidia.gpu.container.cpu.limit
// for each container that holds a GPU, from its cgroup: the CPU beside the
// GPU, so that an input-bound job shows as such. It is used from the
// scrape goroutine only.
type Containers struct {
	logger *zap.Logger
	reader *attribution.CgroupCPUReader
	// warned holds the causes of failed reads already logged
	// (attribution.ErrorCause: less the paths, which name the container's
	// cgroup, and the PID it was read through): a wrong cgroup_root fails
	// every container the same way, and is logged once, not once per
	// container (attribution.NewCauseLog).
	warned *logonce.Log
	// seen holds, within one scrape, the containers holding a GPU, by
	// container id.
	seen map[string]container
}

// maxWarnedCauses bounds the causes remembered; later causes are logged at
// debug level.
const maxWarnedCauses = 16

// container is a container with a GPU process in it.
type container struct {
	owner  attribution.Owner
	pid    int
	cgroup attribution.Cgroup // the process's, as attribution read it
}

// NewContainers reads the containers' CPU with reader.
func NewContainers(logger *zap.Logger, reader *attribution.CgroupCPUReader) *Containers {
	return &Containers{logger: logger, reader: reader, warned: attribution.NewCauseLog(maxWarnedCauses), seen: map[string]container{}}
}

// Add adds the containers of a GPU's processes (and its MIG devices'
// processes).
func (c *Containers) Add(g *GPU) {
	add := func(procs []Process) {
		for _, p := range procs {
			id := p.Owner.ContainerID
			if id == "" {
				continue // a host process: the host's CPU (host_metrics) covers it
			}
			if ctr, ok := c.seen[id]; !ok || ctr.owner.PodName == "" && p.Owner.PodName != "" {
				c.seen[id] = container{owner: p.Owner, pid: int(p.PID), cgroup: p.Cgroup}
			}
		}
	}
	add(g.Processes)
	for _, m := range g.MIGs {
		add(m.Processes)
	}
}

// Record reads the cgroup of each container added in this scrape and
// records its CPU on a resource of the container (and its pod); the next
// scrape adds its own.
func (c *Containers) Record(mb *metadata.MetricsBuilder, ts pcommon.Timestamp) {
	defer clear(c.seen)
	ids := make([]string, 0, len(c.seen))
	for id := range c.seen {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		ctr := c.seen[id]
		// The cgroup the process was found in during attribution: the
		// container's own, whatever process is in it now, without reading
		// /proc again. Where that fails (the container gone, a wrong cgroup
		// root) the PID tells why: had it exited and been reused since,
		// another container's CPU would go out as this one's.
		// ReadContainer checks, and that is no failure.
		cpu, err := c.reader.ReadCgroup(ctr.cgroup)
		if err != nil {
			cpu, err = c.reader.ReadContainer(ctr.pid, id)
		}
		if err != nil {
			if !errors.Is(err, attribution.ErrProcessNotFound) && !errors.Is(err, attribution.ErrContainerChanged) {
				c.warn(id, err)
			}
			continue
		}
		mb.RecordContainerCPUTimeDataPoint(ts, cpu.UsageSeconds)
		if cpu.LimitCores > 0 {
			mb.RecordNvidiaGpuContainerCPULimitDataPoint(ts, cpu.LimitCores)
		}
		rb := mb.NewResourceBuilder()
		SetOwner(rb, ctr.owner) // its container.id is id
		mb.EmitForResource(metadata.WithResource(rb.Emit()))
	}
}

// warn logs a failed read once per cause, naming the first container it
// happened to.
func (c *Containers) warn(id string, err error) {
	v := c.warned.Fail(attribution.ErrorCause(err), "")
	if v.Full {
		c.logger.Debug("Cannot read the CPU of a container that holds a GPU", zap.String("container.id", id), zap.Error(err))
	}
	if !v.Log {
		return
	}
	c.logger.Warn("Cannot read the CPU of a container that holds a GPU; container.cpu.time is left out for it, "+
		"and for the other containers whose read fails the same way (logged once per cause)",
		zap.String("container.id", id), zap.Error(err))
}
