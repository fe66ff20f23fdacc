package nvmlreceiver

import (
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/receiver"

	"github.com/otelcol-nvml/otelcol-nvml/internal/attribution"
	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient"
	"github.com/otelcol-nvml/otelcol-nvml/receiver/nvmlreceiver/internal/metadata"
)

// reporter turns samples into pdata: it attributes each GPU's processes to
// their owners and records the points through the generated builder. It
// is used from the scrape goroutine only.
type reporter struct {
	cfg     *Config
	mb      *metadata.MetricsBuilder
	owners  *attribution.Attributor // made at start
	dropped map[string]int64        // per GPU UUID: processes left out, cumulative
	leftOut *leftOut                // which processes dropped has counted
	cpu     *containerCPU           // nil when processes are off
	// containers holds, within one scrape, the containers holding a GPU,
	// for their CPU.
	containers map[string]gpuContainer
	// session is the NVML session the points come from (0: none yet
	// since start).
	session uint64
	// accounts holds the GPU-time counters; unread holds, within one
	// scrape, the GPUs whose read is stuck, whose accounts wait for them.
	accounts *accountant
	unread   map[string]bool
	// readings are the enabled plain metrics', in the order the client
	// reads them; since is the builder's start, the session's.
	readings []plainReading
	since    pcommon.Timestamp
}

func newReporter(cfg *Config) *reporter {
	return &reporter{
		cfg:        cfg,
		dropped:    map[string]int64{},
		leftOut:    newLeftOut(),
		containers: map[string]gpuContainer{},
		accounts:   newAccountant(cfg),
		unread:     map[string]bool{},
		readings:   enabledReadings(&cfg.Metrics),
	}
}

func (r *reporter) start(set receiver.Settings, now time.Time) {
	// A new start time, now on the samples' clock: the cumulative counts
	// start again (the XIDs are cleared when the event watcher stops, at
	// Shutdown).
	r.since = pcommon.NewTimestampFromTime(now)
	r.mb = metadata.NewMetricsBuilder(r.cfg.MetricsBuilderConfig, set, metadata.WithStartTime(r.since))
	r.session = 0
	clear(r.dropped)
	r.leftOut.reset()
	r.accounts.reset(now, false)
	r.owners = newAttributor(r.cfg, set.Logger)
	if r.cfg.Processes.Enabled {
		r.cpu = &containerCPU{logger: set.Logger, warned: attribution.NewCauseLog(maxWarnedCauses),
			reader: attribution.NewCgroupCPUReader(r.cfg.Processes.ProcRoot, r.cfg.Processes.CgroupRoot)}
	}
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
		clear(r.dropped)
		r.leftOut.reset()
		r.accounts.reset(openedAt, true)
	}
}

// beginScrape reads what is read once per scrape for every GPU: the Slurm
// allocation.
func (r *reporter) beginScrape() {
	if r.owners != nil {
		r.owners.Refresh()
	}
}

// gpu records one GPU's sample.
func (r *reporter) gpu(info nvmlclient.DeviceInfo, smp *nvmlclient.Sample, xids map[int64]int64) {
	rep := r.report(info, smp, xids)
	r.account(&rep)
	recordGPU(r.mb, rep)
	containersOf(rep, r.containers)
}

// lost records a lost GPU on its device resource: hw.status failed and its
// XID counts, the same series as when it was read.
func (r *reporter) lost(ts pcommon.Timestamp, info nvmlclient.DeviceInfo, xids map[int64]int64) {
	r.unobserved(ts, info, reasonLost, func() { recordLost(r.mb, ts, xids) })
}

// stuck records a GPU whose read is stuck in NVML on its device resource:
// hw.status degraded and its XID counts, the same series as when it was
// read, so that it never silently vanishes.
func (r *reporter) stuck(ts pcommon.Timestamp, info nvmlclient.DeviceInfo, xids map[int64]int64) {
	r.unobserved(ts, info, reasonStuck, func() {
		recordStatus(r.mb, ts, hwState(gpuStuck, nil))
		recordXIDs(r.mb, ts, xids)
	})
}

// emit records the CPU of the containers holding a GPU in this scrape, and
// returns the scrape's metrics.
func (r *reporter) emit(now pcommon.Timestamp) pmetric.Metrics {
	if r.cpu != nil {
		r.cpu.record(r.mb, now, r.containers)
	}
	clear(r.containers)
	md := r.mb.Emit()
	r.accounts.endScrape(r.unread)
	clear(r.unread)
	return md
}

// account adds the window of rep's GPU and of each of its MIG devices to
// their GPU-time counters.
func (r *reporter) account(rep *gpuReport) {
	smp := rep.sample
	w := deviceWindow{
		id: rep.info.UUID, parent: rep.info.UUID, at: smp.Time, owner: rep.owner,
		listed: smp.ProcessesListed, allocated: r.owners.Allocated(rep.info.UUID),
		holders: mpsHolders(rep.processes), processes: rep.processes, mps: mpsShared(rep.processes),
		busy: smp.Utilization[nvmlclient.EngineGeneral],
	}
	if smp.GPM != nil {
		w.active = smp.GPM.Activity[nvmlclient.GPMSMActivity]
	}
	for _, m := range rep.migs {
		w.holders += mpsHolders(m.processes)
		w.allocated = w.allocated || r.owners.Allocated(m.sample.Info.UUID)
	}
	var procAccounts []*processAccount
	rep.account, procAccounts = r.accounts.add(w)
	for i := range procAccounts {
		rep.processes[i].account = procAccounts[i]
	}
	for i := range rep.migs {
		m := &rep.migs[i]
		mw := deviceWindow{
			id: m.sample.Info.UUID, parent: rep.info.UUID, mig: m.sample.Info, at: smp.Time, owner: m.owner,
			listed: smp.ProcessesListed, allocated: r.owners.Allocated(m.sample.Info.UUID),
			holders: mpsHolders(m.processes), processes: m.processes, mps: mpsShared(m.processes),
		}
		if m.sample.GPM != nil {
			mw.active = m.sample.GPM.Activity[nvmlclient.GPMSMActivity]
		}
		m.account, procAccounts = r.accounts.add(mw)
		for j := range procAccounts {
			m.processes[j].account = procAccounts[j]
		}
	}
}

// report attributes one GPU's sample: its processes' owners and, when they
// all share one, the GPU's own. In MIG mode the processes go to their MIG
// devices instead.
func (r *reporter) report(info nvmlclient.DeviceInfo, smp *nvmlclient.Sample, xids map[int64]int64) gpuReport {
	rep := gpuReport{info: info, sample: smp, xids: xids, readings: r.readings, start: r.since}
	r.owners.SetMinor(info.UUID, info.MinorNumber)
	r.owners.SetIndex(info.UUID, info.Index)
	setMIGPlacements(r.owners, info, smp.MIG)
	rep.holders = r.owners.Holders(info.UUID)
	if !smp.ProcessesListed {
		for i := range smp.MIG {
			rep.migs = append(rep.migs, migReport{sample: &smp.MIG[i], holders: r.owners.Holders(smp.MIG[i].Info.UUID)})
		}
		return rep
	}
	limit := r.cfg.Processes.MaxPerGPU
	listed, left := smp.Processes, []nvmlclient.Process(nil)
	if len(smp.MIG) == 0 {
		rep.processes, rep.owner, left = attribute(r.owners, info.UUID, smp.Processes, limit)
		rep.owner = markMPS(r.owners, info.UUID, rep.processes, rep.owner)
	}
	for i := range smp.MIG {
		m := migReport{sample: &smp.MIG[i], holders: r.owners.Holders(smp.MIG[i].Info.UUID)}
		var l []nvmlclient.Process
		m.processes, m.owner, l = attribute(r.owners, m.sample.Info.UUID, m.sample.Processes, limit)
		m.owner = markMPS(r.owners, m.sample.Info.UUID, m.processes, m.owner)
		left = append(left, l...)
		listed = append(listed[:len(listed):len(listed)], m.sample.Processes...)
		rep.migs = append(rep.migs, m)
	}
	r.dropped[info.UUID] += int64(r.leftOut.add(info.UUID, listed, left, r.owners.Started))
	rep.dropped = r.dropped[info.UUID]
	return rep
}
