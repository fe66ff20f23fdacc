package attribution

import "github.com/otelcol-nvml/otelcol-nvml/internal/logonce"

// NewCauseLog returns the log of the causes of failures already logged, at
// most max of them: what fails the same way for every process or
// container is logged once, not once each. A new cause once max are
// remembered is not: its Verdict says Full (log it at debug level, or not
// at all), so that the warn lines stay bounded as well as the memory.
func NewCauseLog(max int) *logonce.Log {
	return logonce.New(max, logonce.WithWhenFull(logonce.KeepOldest))
}
