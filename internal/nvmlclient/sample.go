package nvmlclient

import "time"

// Opt is a reading that may be absent: not supported on this device, or not
// taken this time.
type Opt[T any] struct {
	Value T
	OK    bool
}

func some[T any](v T) Opt[T] { return Opt[T]{Value: v, OK: true} }

// Engine names a utilization engine: the hw.gpu.task of semconv.
type Engine int

const (
	EngineGeneral Engine = iota
	EngineEncoder
	EngineDecoder
	engineCount
)

// Clock names a clock domain.
type Clock int

const (
	ClockSM Clock = iota
	ClockMemory
	ClockGraphics
	ClockVideo
	clockCount
)

// Sample is one reading of one GPU, in SI units. Every field is optional:
// what the device does not support stays absent.
type Sample struct {
	Time time.Time

	// Utilization of each engine, 0..1, averaged over the window since the
	// previous sample.
	Utilization [engineCount]Opt[float64]
	// MemoryControllerUtilization is the fraction of time memory was read or written,
	// 0..1, over the same window.
	MemoryControllerUtilization Opt[float64]

	MemoryUsedBytes     Opt[uint64]
	MemoryTotalBytes    Opt[uint64]
	MemoryReservedBytes Opt[uint64]

	TemperatureCelsius Opt[float64] // the die
	// MemoryTemperatureCelsius is the HBM's (a field value); absent on
	// boards without a memory sensor.
	MemoryTemperatureCelsius Opt[float64]
	PowerWatts               Opt[float64]
	PowerLimitWatts          Opt[float64]
	// EnergyJoules is the newest reading of the energy counter. It, the
	// violation seconds and the PCIe replays of Health are read on their
	// own cadence, off the scrape path, and were taken at CountersTime.
	EnergyJoules     Opt[float64]
	CountersTime     time.Time
	ClockHz          [clockCount]Opt[int64]
	PerformanceState Opt[int64]
	FanSpeed         Opt[float64] // 0..1

	// Processes on the GPU, when process reading is on. ProcessesListed
	// says the lists were read (an empty list is then a fact, not a gap).
	Processes       []Process
	ProcessesListed bool

	// GPM is what GPM measured since the previous read; nil on devices
	// without GPM and on the read that only starts a window.
	GPM *GPMReading

	Health Health

	// MIG holds one reading per MIG device when the GPU is in MIG mode.
	MIG []MIGSample
}
