//go:build cgo

package collect

import (
	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient/call"
	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient/sample"
)

// Health signals: what operators get paged on. ECC errors and row remapping
// say the memory is wearing out, clock-event reasons say why the GPU runs
// below its clocks now, and the violation counters say for how long it has.

// healthCollector reads the remapped rows; the other health readings are
// plain rows of the read table.
type healthCollector struct{}

func (*healthCollector) baseline(*call.GPU) {}

// read reads the remapped rows, four readings of one call; the other
// health readings are plain rows of the read table.
func (*healthCollector) read(r *reading, s *sample.Sample) {
	out := &s.Health
	var corr, unc int
	var pending, failed bool
	if r.Do(call.RemappedRows, func() (ret nvml.Return) { corr, unc, pending, failed, ret = r.GPU.Handle.GetRemappedRows(); return }) {
		out.RemappedCorrected, out.RemappedUncorrected = sample.Some(int64(corr)), sample.Some(int64(unc))
		out.RemapPending, out.RemapFailed = sample.Some(pending), sample.Some(failed)
	}
}
