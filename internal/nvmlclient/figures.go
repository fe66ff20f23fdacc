package nvmlclient

import "github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient/sample"

// What the receiver asks for and gets back: aliases of package sample's
// (sample/readings.go, sample/sample.go). A Figure is a sample.Reading.

type (
	// Figure names one thing this package can read of a GPU.
	Figure = sample.Reading
	// Figures is a set of figures.
	Figures = sample.Readings
	// Opt is a reading that may be absent.
	Opt[T any] = sample.Opt[T]
	// Sample is one reading of one GPU, in SI units.
	Sample = sample.Sample
	// Engine names a utilization engine.
	Engine = sample.Engine
	// Health is one reading of a GPU's health signals.
	Health = sample.Health
	// ClockEventReason names one bit of the clock event reasons.
	ClockEventReason = sample.ClockEventReason
	// GPMActivity names the GPM activity metrics.
	GPMActivity = sample.GPMActivity
	// GPMTraffic names the GPM byte counters.
	GPMTraffic = sample.GPMTraffic
	// GPMReading is what GPM measured over one window.
	GPMReading = sample.GPMReading
	// Process is one process with a context on a GPU.
	Process = sample.Process
	// MPSRole is a process's part in CUDA MPS.
	MPSRole = sample.MPSRole
	// MIGInfo is the static identity of one MIG device.
	MIGInfo = sample.MIGInfo
	// MIGSample is one reading of one MIG device.
	MIGSample = sample.MIGSample
)

// The figures read by their own code.
const (
	FigUtilization        = sample.Utilization
	FigMemoryController   = sample.MemoryController
	FigMemory             = sample.Memory
	FigProcesses          = sample.Processes
	FigProcessUtilization = sample.ProcessUtilization
	FigECCCorrected       = sample.ECCCorrected
	FigECCUncorrected     = sample.ECCUncorrected
	FigRemappedRows       = sample.RemappedRows
	FigClockEvents        = sample.ClockEvents
	FigSMActivity         = sample.SMActivity
	FigSMOccupancy        = sample.SMOccupancy
	FigGraphicsActivity   = sample.GraphicsActivity
	FigTensorActivity     = sample.TensorActivity
	FigTensorPipes        = sample.TensorPipes
	FigPipes              = sample.Pipes
	FigDRAMBandwidth      = sample.DRAMBandwidth
	FigPCIeTraffic        = sample.PCIeTraffic
	FigNVLinkTraffic      = sample.NVLinkTraffic
)

// AllFigures asks for every figure: what a Client reads without WithFigures.
const AllFigures = sample.All

// FiguresOf returns the set of fs.
func FiguresOf(fs ...Figure) Figures { return sample.Of(fs...) }

// The engines, clock event reasons and GPM metrics of a Sample.
const (
	EngineGeneral = sample.EngineGeneral
	EngineEncoder = sample.EngineEncoder
	EngineDecoder = sample.EngineDecoder

	ReasonGPUIdle              = sample.ReasonGPUIdle
	ReasonApplicationsClocks   = sample.ReasonApplicationsClocks
	ReasonSWPowerCap           = sample.ReasonSWPowerCap
	ReasonHWSlowdown           = sample.ReasonHWSlowdown
	ReasonSyncBoost            = sample.ReasonSyncBoost
	ReasonSWThermalSlowdown    = sample.ReasonSWThermalSlowdown
	ReasonHWThermalSlowdown    = sample.ReasonHWThermalSlowdown
	ReasonHWPowerBrakeSlowdown = sample.ReasonHWPowerBrakeSlowdown
	ReasonDisplayClocks        = sample.ReasonDisplayClocks

	GPMSMActivity       = sample.GPMSMActivity
	GPMSMOccupancy      = sample.GPMSMOccupancy
	GPMGraphicsActivity = sample.GPMGraphicsActivity
	GPMTensorActivity   = sample.GPMTensorActivity
	GPMTensorHMMA       = sample.GPMTensorHMMA
	GPMTensorIMMA       = sample.GPMTensorIMMA
	GPMTensorDMMA       = sample.GPMTensorDMMA
	GPMTensorDFMA       = sample.GPMTensorDFMA
	GPMFP64             = sample.GPMFP64
	GPMFP32             = sample.GPMFP32
	GPMFP16             = sample.GPMFP16
	GPMInteger          = sample.GPMInteger
	GPMDRAMBandwidth    = sample.GPMDRAMBandwidth

	GPMPCIeTX   = sample.GPMPCIeTX
	GPMPCIeRX   = sample.GPMPCIeRX
	GPMNVLinkTX = sample.GPMNVLinkTX
	GPMNVLinkRX = sample.GPMNVLinkRX

	// NoInstance is NVML's "not a MIG instance" id.
	NoInstance = sample.NoInstance

	MPSNone   = sample.MPSNone
	MPSServer = sample.MPSServer
	MPSClient = sample.MPSClient
	// MPSServerName is the MPS server's executable name.
	MPSServerName = sample.MPSServerName
	// MaxProcessesPerGPU caps the process list read from one GPU.
	MaxProcessesPerGPU = sample.MaxProcessesPerGPU
)
