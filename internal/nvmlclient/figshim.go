package nvmlclient

import "github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient/figure"

// Transitional: the names the read table and the collectors use until they
// move under the figure package's own.
const (
	firstPlainFigure      = figure.FirstPlain
	figureCount           = figure.Count
	engineCount           = figure.EngineCount
	clockEventReasonCount = figure.ClockEventReasonCount
	gpmActivityCount      = figure.GPMActivityCount
	gpmTrafficCount       = figure.GPMTrafficCount
)

func some[T any](v T) Opt[T] { return figure.Some(v) }
