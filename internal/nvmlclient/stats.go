//go:build cgo

package nvmlclient

import (
	"time"

	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient/call"
)

// CallStat is how long one NVML call has taken, over every device and read
// since Open: the readings that explain a slow scrape.
type CallStat struct {
	Call  string        `json:"call"`
	Count int64         `json:"count"`
	Mean  time.Duration `json:"mean_ns"`
	Max   time.Duration `json:"max_ns"`
}

// CallStats returns the timing of every NVML call made by Device reads,
// summed over the devices, in call order. Calls never made are left out.
func (c *Client) CallStats() []CallStat {
	var out []CallStat
	devices := c.Devices()
	if len(devices) == 0 {
		return nil
	}
	table := devices[0].gpu.Table
	for k := range table {
		st := CallStat{Call: table.Name(call.ID(k))}
		var total time.Duration
		for _, d := range devices {
			n, sum, most := d.gpu.Stat(call.ID(k))
			st.Count += n
			total += sum
			st.Max = max(st.Max, most)
		}
		if st.Count == 0 {
			continue
		}
		st.Mean = total / time.Duration(st.Count)
		out = append(out, st)
	}
	return out
}
