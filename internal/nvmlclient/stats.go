//go:build cgo

package nvmlclient

import "time"

// CallStat is how long one NVML call has taken, over every device and read
// since Open: the figures that explain a slow scrape.
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
	for k := call(0); k < allCalls; k++ {
		st := CallStat{Call: k.String()}
		var total int64
		for _, d := range c.Devices() {
			cs := &d.book.stats[k]
			st.Count += cs.count.Load()
			total += cs.totalNanos.Load()
			st.Max = max(st.Max, time.Duration(cs.maxNanos.Load()))
		}
		if st.Count == 0 {
			continue
		}
		st.Mean = time.Duration(total / st.Count)
		out = append(out, st)
	}
	return out
}
