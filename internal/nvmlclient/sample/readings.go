package sample

import "math/bits"

// Reading names one thing a GPU's read can give: a value of the Sample,
// or a group of values that one NVML call answers together. The receiver
// maps each of its enabled metrics to the readings it needs and asks for
// those (nvmlclient.WithReadings). A call is made only while a reading it
// answers is asked for.
type Reading uint

// The readings, each read by its own code. The plain reads, one NVML value
// each, are not among them: a client reads each of its WithReads.
const (
	Utilization        Reading = iota // Sample.Utilization (every engine)
	MemoryController                  // Sample.MemoryControllerUtilization
	Memory                            // Sample.Memory*Bytes, and each MIG device's
	Processes                         // Sample.Processes: the lists (with WithProcesses)
	ProcessUtilization                // each Process's engine utilization
	ECCCorrected                      // Health.ECCCorrected
	ECCUncorrected                    // Health.ECCUncorrected
	RemappedRows                      // Health.Remapped*, RemapPending, RemapFailed
	ClockEvents                       // Health.ClockEvents
	SMActivity                        // GPM: GPMReading.Activity[GPMSMActivity]
	SMOccupancy                       // GPM: GPMSMOccupancy
	GraphicsActivity                  // GPM: GPMGraphicsActivity
	TensorActivity                    // GPM: GPMTensorActivity
	TensorPipes                       // GPM: GPMTensorHMMA..DFMA
	Pipes                             // GPM: GPMFP64..GPMInteger
	DRAMBandwidth                     // GPM: GPMDRAMBandwidth
	PCIeTraffic                       // GPM: TrafficBytes[GPMPCIeTX, GPMPCIeRX]
	NVLinkTraffic                     // GPM: TrafficBytes[GPMNVLinkTX, GPMNVLinkRX]
	// Count is the number of readings.
	Count
)

// Readings is a set of readings.
type Readings uint64

// All asks for every reading: what a Client reads without WithFigures.
const All = Readings(1)<<Count - 1

// A set holds at most 64 readings: the readers of their own, which a new
// plain metric never adds to.
var _ = [64 - Count]struct{}{}

// Of returns the set of fs.
func Of(fs ...Reading) Readings {
	var out Readings
	for _, f := range fs {
		out |= 1 << f
	}
	return out
}

// Has reports whether f is in the set.
func (s Readings) Has(f Reading) bool { return s&(1<<f) != 0 }

// Any reports whether the sets share a reading.
func (s Readings) Any(o Readings) bool { return s&o != 0 }

// Len is the number of readings in the set.
func (s Readings) Len() int { return bits.OnesCount64(uint64(s)) }
