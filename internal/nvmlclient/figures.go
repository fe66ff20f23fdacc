package nvmlclient

import "math/bits"

// Figure names one thing this package can read of a GPU: a figure of the
// Sample, or a group of figures that one NVML call answers together. The
// package knows no metric names: the receiver maps each of its enabled
// metrics to the figures it needs and asks for those (WithFigures). A call
// is made only while a figure it answers is asked for.
type Figure uint

// The figures read by their own code. The plain figures, one NVML value
// each, follow them (figures_gen.go): each is one row of the plain read
// table (plain.go), whose figure constant is generated from the row.
const (
	FigUtilization        Figure = iota // Sample.Utilization (every engine)
	FigMemoryController                 // Sample.MemoryControllerUtilization
	FigMemory                           // Sample.Memory*Bytes, and each MIG device's
	FigProcesses                        // Sample.Processes: the lists (with WithProcesses)
	FigProcessUtilization               // each Process's engine utilization
	FigECCCorrected                     // Health.ECCCorrected
	FigECCUncorrected                   // Health.ECCUncorrected
	FigRemappedRows                     // Health.Remapped*, RemapPending, RemapFailed
	FigClockEvents                      // Health.ClockEvents
	FigSMActivity                       // GPM: GPMReading.Activity[GPMSMActivity]
	FigSMOccupancy                      // GPM: GPMSMOccupancy
	FigGraphicsActivity                 // GPM: GPMGraphicsActivity
	FigTensorActivity                   // GPM: GPMTensorActivity
	FigTensorPipes                      // GPM: GPMTensorHMMA..DFMA
	FigPipes                            // GPM: GPMFP64..GPMInteger
	FigDRAMBandwidth                    // GPM: GPMDRAMBandwidth
	FigPCIeTraffic                      // GPM: TrafficBytes[GPMPCIeTX, GPMPCIeRX]
	FigNVLinkTraffic                    // GPM: TrafficBytes[GPMNVLinkTX, GPMNVLinkRX]
	firstPlainFigure
)

// Figures is a set of figures.
type Figures uint64

// AllFigures asks for every figure: what a Client reads without WithFigures.
const AllFigures = Figures(1)<<figureCount - 1

// A set holds at most 64 figures.
var _ = [64 - figureCount]struct{}{}

// FiguresOf returns the set of fs.
func FiguresOf(fs ...Figure) Figures {
	var out Figures
	for _, f := range fs {
		out |= 1 << f
	}
	return out
}

// Has reports whether f is in the set.
func (s Figures) Has(f Figure) bool { return s&(1<<f) != 0 }

// Any reports whether the sets share a figure.
func (s Figures) Any(o Figures) bool { return s&o != 0 }

// Len is the number of figures in the set.
func (s Figures) Len() int { return bits.OnesCount64(uint64(s)) }

// WithFigures makes every Read ask NVML only for the figures in want.
// Without it, every figure is read.
func WithFigures(want Figures) Option { return func(o *options) { o.figures = want } }

// WithLeftOutCount sets how a ReadError counts what its failed calls left
// out (ReadError.Metrics): the receiver counts its enabled metrics that
// need one of the figures. Without it, the figures are counted.
func WithLeftOutCount(count func(Figures) int) Option {
	return func(o *options) { o.leftOut = count }
}
