package nvmlreceiver

import (
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/receiver"
	"go.uber.org/zap"

	"github.com/otelcol-nvml/otelcol-nvml/internal/attribution"
	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient"
	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient/sample"
	"github.com/otelcol-nvml/otelcol-nvml/receiver/nvmlreceiver/internal/accounting"
	"github.com/otelcol-nvml/otelcol-nvml/receiver/nvmlreceiver/internal/holders"
	"github.com/otelcol-nvml/otelcol-nvml/receiver/nvmlreceiver/internal/metadata"
	"github.com/otelcol-nvml/otelcol-nvml/receiver/nvmlreceiver/internal/record"
)

// reporter turns samples into pdata: it finds who holds each GPU
// (internal/holders), adds its window to the GPU-time accounts
// (internal/accounting) and records the points through the generated
// builder (internal/record). It is used from the scrape goroutine only.
type reporter struct {
	cfg        *Config
	mb         *metadata.MetricsBuilder
	owners     *attribution.Attributor // made at start
	holders    *holders.Tracker        // made at start
	containers *holders.Containers     // nil when processes are off
	// session is the NVML session the points come from (0: none yet
	// since start).
	session uint64
	// accounts holds the GPU-time counters; unread holds, within one
	// scrape, the GPUs whose read is stuck, whose accounts wait for them.
	accounts *accounting.Accountant
	unread   map[string]bool
	// readings are the enabled plain metrics', in the order the client
	// reads them; since is the builder's start, the session's.
	readings []record.Reading
	since    pcommon.Timestamp
}

func newReporter(cfg *Config) *reporter {
	return &reporter{
		cfg:      cfg,
		accounts: accounting.New(cfg.Processes.Enabled || cfg.Kubernetes.Enabled, cfg.Accounting.IdleThreshold, cfg.CollectionInterval),
		unread:   map[string]bool{},
		readings: record.Readings(&cfg.Metrics),
	}
}

func (r *reporter) start(set receiver.Settings, now time.Time) {
	// A new start time, now on the samples' clock: the cumulative counts
	// start again (the XIDs are cleared when the event watcher stops, at
	// Shutdown).
	r.since = pcommon.NewTimestampFromTime(now)
	r.mb = metadata.NewMetricsBuilder(r.cfg.MetricsBuilderConfig, set, metadata.WithStartTime(r.since))
	r.session = 0
	r.accounts.Reset(now, false)
	r.owners = newAttributor(r.cfg, set.Logger)
	r.holders = holders.New(r.owners, r.cfg.Processes.MaxPerGPU)
	if r.cfg.Processes.Enabled {
		r.containers = holders.NewContainers(set.Logger, attribution.NewCgroupCPUReader(r.cfg.Processes.ProcRoot, r.cfg.Processes.CgroupRoot))
	}
}

// newAttributor configures attribution from the receiver's configuration:
// processes through processes::proc_root, pods through the kubelet, Slurm
// jobs through their cgroups and slurm::gpustat_dir.
func newAttributor(cfg *Config, logger *zap.Logger) *attribution.Attributor {
	var ac attribution.Config
	if cfg.Processes.Enabled {
		ac.ProcRoot = cfg.Processes.ProcRoot
		ac.CommandLine = cfg.ResourceAttributes.ProcessCommandLine.Enabled
	}
	ac.SlurmGPUStatDir = cfg.Slurm.GPUStatDir
	if cfg.Kubernetes.Enabled {
		pc := attribution.DefaultPodResourcesConfig()
		pc.Socket, pc.RefreshInterval = cfg.Kubernetes.PodResourcesSocket, cfg.Kubernetes.RefreshInterval
		pc.ResourcePrefixes = cfg.Kubernetes.ResourcePrefixes
		pc.DRADrivers = append([]string{}, cfg.Kubernetes.DRA.Drivers...)
		ac.PodResources = &pc
		if rs := cfg.Kubernetes.DRA.ResourceSlices; rs.Enabled {
			ac.ResourceSlices = &attribution.ResourceSlicesConfig{NodeName: cfg.Kubernetes.NodeName, Kubeconfig: rs.Kubeconfig}
		}
	}
	return attribution.New(ac, logger)
}

// newSession is told which NVML session the scrape reads. After a
// re-initialization (every GPU lost, a driver reload) the cumulative
// counts start again: the devices' totals, the driver's counters, the
// dropped processes and the XIDs (the event counter's are cleared when its
// watcher stops). Their points then carry the new session's start time.
func (r *reporter) newSession(gen uint64, openedAt time.Time) {
	if gen == r.session {
		return
	}
	restarted := r.session != 0
	r.session = gen
	if restarted {
		r.since = pcommon.NewTimestampFromTime(openedAt)
		r.mb.Reset(metadata.WithStartTime(r.since))
		r.holders.Reset()
		r.accounts.Reset(openedAt, true)
	}
}

// beginScrape reads what is read once per scrape for every GPU: the Slurm
// allocation.
func (r *reporter) beginScrape() {
	if r.owners != nil {
		r.owners.Refresh()
	}
}

// gpu records one GPU's sample, with who holds it and its accounts.
func (r *reporter) gpu(info nvmlclient.DeviceInfo, smp *sample.Sample, xids map[int64]int64) {
	g := record.GPU{Info: info, Sample: smp, Holders: r.holders.GPU(info, smp), XIDs: xids, Readings: r.readings, Start: r.since}
	g.Accounts = r.accounts.GPU(info, smp, &g.Holders, r.owners.Allocated)
	g.Record(r.mb)
	if r.containers != nil {
		r.containers.Add(&g.Holders)
	}
}

// unobserved records a GPU that could not be read, for reason: stuck (its
// read is still running in NVML: hw.status degraded), lost (hw.status
// failed) or failed outright (read_failed); a stuck or lost GPU's XID
// counts go on as when it is read. The time since its accounts' last
// window is added to them as unobserved; they are kept.
func (r *reporter) unobserved(ts pcommon.Timestamp, info nvmlclient.DeviceInfo, reason accounting.Reason, xids map[int64]int64) {
	r.unread[info.UUID] = true
	accts := r.accounts.Unobserved(info.UUID, ts.AsTime(), reason)
	record.Unobserved(r.mb, ts, r.since, info, reason, xids, accts)
}

// emit records the CPU of the containers holding a GPU in this scrape, and
// returns the scrape's metrics.
func (r *reporter) emit(now pcommon.Timestamp) pmetric.Metrics {
	if r.containers != nil {
		r.containers.Record(r.mb, now)
	}
	md := r.mb.Emit()
	r.accounts.EndScrape(r.unread)
	clear(r.unread)
	return md
}
