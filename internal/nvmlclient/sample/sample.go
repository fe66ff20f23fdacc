package sample

import (
	"math"
	"time"
)

// Opt is a reading that may be absent: not supported on this device, or not
// taken this time.
type Opt[T any] struct {
	Value T
	OK    bool
}

// Some is v, read.
func Some[T any](v T) Opt[T] { return Opt[T]{Value: v, OK: true} }

// Engine names a utilization engine: the hw.gpu.task of semconv.
type Engine int

const (
	EngineGeneral Engine = iota
	EngineEncoder
	EngineDecoder
	// EngineCount is the number of engines.
	EngineCount
)

// Sample is one reading of one GPU, in SI units. Every field is optional:
// what the device does not support stays absent.
type Sample struct {
	Time time.Time

	// Utilization of each engine, 0..1, averaged over the window since the
	// previous sample.
	Utilization [EngineCount]Opt[float64]
	// MemoryControllerUtilization is the fraction of time memory was read or written,
	// 0..1, over the same window.
	MemoryControllerUtilization Opt[float64]

	MemoryUsedBytes     Opt[uint64]
	MemoryTotalBytes    Opt[uint64]
	MemoryReservedBytes Opt[uint64]

	// Values holds the plain reads' values (nvmlclient.WithReads), in
	// their order, in SI units: a temperature in °C, power in W, a clock
	// in Hz, energy in J, the fan speed and other fractions 0..1.
	Values []Opt[float64]
	// The costly plain reads, read on the counters' cadence off the scrape
	// path, were taken at CountersTime.
	CountersTime time.Time
	// CountersSince is when each counter's count began, by its place in
	// Values, where it was reset within the session (a GPU reset); zero
	// while it counts since the session opened, and nil while none was
	// reset.
	CountersSince []time.Time

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

// ClockEventReason names one bit of nvmlDeviceGetCurrentClocksEventReasons.
type ClockEventReason int

const (
	ReasonGPUIdle ClockEventReason = iota
	ReasonApplicationsClocks
	ReasonSWPowerCap
	ReasonHWSlowdown
	ReasonSyncBoost
	ReasonSWThermalSlowdown
	ReasonHWThermalSlowdown
	ReasonHWPowerBrakeSlowdown
	ReasonDisplayClocks
	// ClockEventReasonCount is the number of reasons.
	ClockEventReasonCount
)

// Health is one reading of a GPU's health signals.
type Health struct {
	// Volatile ECC error counts since the driver loaded.
	ECCCorrected, ECCUncorrected Opt[uint64]
	// Row remapping (Ampere and newer).
	RemappedCorrected, RemappedUncorrected Opt[int64]
	RemapPending, RemapFailed              Opt[bool]
	// Active clock-event reasons; absent when the call is not supported.
	ClockEvents [ClockEventReasonCount]Opt[bool]
}

// GPMActivity names the GPM activity metrics, each a fraction 0..1.
type GPMActivity int

const (
	GPMSMActivity GPMActivity = iota
	GPMSMOccupancy
	GPMGraphicsActivity
	GPMTensorActivity
	GPMTensorHMMA
	GPMTensorIMMA
	GPMTensorDMMA
	GPMTensorDFMA
	GPMFP64
	GPMFP32
	GPMFP16
	GPMInteger
	GPMDRAMBandwidth
	// GPMActivityCount is the number of activity metrics.
	GPMActivityCount
)

// GPMTraffic names the GPM byte counters.
type GPMTraffic int

const (
	GPMPCIeTX GPMTraffic = iota
	GPMPCIeRX
	GPMNVLinkTX
	GPMNVLinkRX
	// GPMTrafficCount is the number of traffic counters.
	GPMTrafficCount
)

// GPMReading is what GPM measured over one window.
type GPMReading struct {
	Activity [GPMActivityCount]Opt[float64]
	// TrafficBytes are cumulative since Open: each window's rate times its
	// length, added up, so that backends derive rates from a counter. The
	// sum is kept in float64 (exact to 8 PiB) and handed out in whole bytes.
	TrafficBytes [GPMTrafficCount]Opt[int64]
}

// Process is one process with a context on a GPU.
type Process struct {
	PID uint32
	// Compute and Graphics say which context types the process holds.
	Compute, Graphics bool
	// Memory used by the process's compute and graphics contexts. Absent
	// where NVML cannot tell (NVML_VALUE_NOT_AVAILABLE, e.g. under some
	// virtualization).
	ComputeMemoryBytes, GraphicsMemoryBytes Opt[uint64]
	// Utilization of each engine by this process, 0..1: NVML's newest
	// sample of it (one per process, a smoothed recent reading; 0 without
	// one in the last 10 s). SMUtil is the process's share of the time a
	// kernel ran, not of the GPU's SMs.
	SMUtil, MemoryControllerUtil, EncoderUtil, DecoderUtil Opt[float64]
	// BusyShare is the process's share of the GPU's busy time since the
	// previous read, 0..1, averaged over the share samples taken since
	// (collect/processes.go); the shares of a GPU's processes sum to 1. Absent
	// when no sample saw a busy process.
	BusyShare Opt[float64]
	// GPUInstanceID and ComputeInstanceID place the process on a MIG slice;
	// both are NoInstance outside MIG.
	GPUInstanceID, ComputeInstanceID uint32
	// MPS is the process's part in CUDA MPS, as the device's MPS list
	// tells (collect/processes.go). A client's own utilization and busy
	// share are not observable (NVML gives the server's, for all its
	// clients together): they are absent, never 0.
	MPS MPSRole
}

// MPSRole is a process's part in CUDA MPS (Multi-Process Service).
type MPSRole uint8

const (
	MPSNone   MPSRole = iota // not under MPS, or not known to be
	MPSServer                // nvidia-cuda-mps-server: runs its clients' kernels
	MPSClient                // a process whose work the MPS server runs
)

// MPSServerName is the MPS server's executable name.
const MPSServerName = "nvidia-cuda-mps-server"

// NoInstance is NVML's "not a MIG instance" id.
const NoInstance = math.MaxUint32

// MemoryBytes is the memory used by all of the process's contexts.
func (p Process) MemoryBytes() Opt[uint64] {
	var total uint64
	ok := false
	for _, m := range []Opt[uint64]{p.ComputeMemoryBytes, p.GraphicsMemoryBytes} {
		if m.OK {
			total += m.Value
			ok = true
		}
	}
	return Opt[uint64]{Value: total, OK: ok}
}

// MIGInfo is the static identity of one MIG device.
type MIGInfo struct {
	UUID              string
	ParentUUID        string
	GPUInstanceID     uint32
	ComputeInstanceID uint32
	Profile           string // e.g. "1g.18gb"
	// The GPU instance's profile id and placement start
	// (nvmlGpuInstanceGetInfo), by which NVIDIA's DRA driver names the MIG
	// device (gpu-<parent minor>-mig-<profile>-<profile id>-<start>).
	// PlacementOK is false where they could not be read: the GPU instance's
	// handle needs a privileged caller.
	GIProfileID, PlacementStart uint32
	PlacementOK                 bool
}

// MIGSample is one reading of one MIG device.
type MIGSample struct {
	Info MIGInfo

	MemoryUsedBytes     Opt[uint64]
	MemoryTotalBytes    Opt[uint64]
	MemoryReservedBytes Opt[uint64]
	// Processes running on this MIG device; filled when process reading is on.
	Processes []Process
	// GPM measured per GPU instance; nil without GPM or on a starting window.
	GPM *GPMReading
	// FirstInInstance says this MIG device carries its GPU instance's memory
	// and GPM; false on the other compute instances of that GPU instance.
	FirstInInstance bool
}

// MaxProcessesPerGPU caps the process list read from one GPU. go-nvml
// v0.13.4-1 doubles its buffer for as long as NVML answers
// INSUFFICIENT_SIZE, without a limit (a soak took the collector to 9.9 GB);
// past this many processes the list is dropped for the scrape instead.
const MaxProcessesPerGPU = 4096
