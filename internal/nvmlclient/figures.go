package nvmlclient

import "github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient/figure"

// What the receiver asks for and gets back: aliases of package figure's
// (figure/figures.go, figure/sample.go).

type (
	// Figure names one thing this package can read of a GPU.
	Figure = figure.Figure
	// Figures is a set of figures.
	Figures = figure.Figures
	// Opt is a reading that may be absent.
	Opt[T any] = figure.Opt[T]
	// Sample is one reading of one GPU, in SI units.
	Sample = figure.Sample
	// Engine names a utilization engine.
	Engine = figure.Engine
	// Health is one reading of a GPU's health signals.
	Health = figure.Health
	// ClockEventReason names one bit of the clock event reasons.
	ClockEventReason = figure.ClockEventReason
	// GPMActivity names the GPM activity metrics.
	GPMActivity = figure.GPMActivity
	// GPMTraffic names the GPM byte counters.
	GPMTraffic = figure.GPMTraffic
	// GPMReading is what GPM measured over one window.
	GPMReading = figure.GPMReading
	// Process is one process with a context on a GPU.
	Process = figure.Process
	// MPSRole is a process's part in CUDA MPS.
	MPSRole = figure.MPSRole
	// MIGInfo is the static identity of one MIG device.
	MIGInfo = figure.MIGInfo
	// MIGSample is one reading of one MIG device.
	MIGSample = figure.MIGSample
)

// The figures read by their own code.
const (
	FigUtilization        = figure.Utilization
	FigMemoryController   = figure.MemoryController
	FigMemory             = figure.Memory
	FigProcesses          = figure.Processes
	FigProcessUtilization = figure.ProcessUtilization
	FigECCCorrected       = figure.ECCCorrected
	FigECCUncorrected     = figure.ECCUncorrected
	FigRemappedRows       = figure.RemappedRows
	FigClockEvents        = figure.ClockEvents
	FigSMActivity         = figure.SMActivity
	FigSMOccupancy        = figure.SMOccupancy
	FigGraphicsActivity   = figure.GraphicsActivity
	FigTensorActivity     = figure.TensorActivity
	FigTensorPipes        = figure.TensorPipes
	FigPipes              = figure.Pipes
	FigDRAMBandwidth      = figure.DRAMBandwidth
	FigPCIeTraffic        = figure.PCIeTraffic
	FigNVLinkTraffic      = figure.NVLinkTraffic
)

// AllFigures asks for every figure: what a Client reads without WithFigures.
const AllFigures = figure.All

// FiguresOf returns the set of fs.
func FiguresOf(fs ...Figure) Figures { return figure.Of(fs...) }

// The engines, clock event reasons and GPM metrics of a Sample.
const (
	EngineGeneral = figure.EngineGeneral
	EngineEncoder = figure.EngineEncoder
	EngineDecoder = figure.EngineDecoder

	ReasonGPUIdle              = figure.ReasonGPUIdle
	ReasonApplicationsClocks   = figure.ReasonApplicationsClocks
	ReasonSWPowerCap           = figure.ReasonSWPowerCap
	ReasonHWSlowdown           = figure.ReasonHWSlowdown
	ReasonSyncBoost            = figure.ReasonSyncBoost
	ReasonSWThermalSlowdown    = figure.ReasonSWThermalSlowdown
	ReasonHWThermalSlowdown    = figure.ReasonHWThermalSlowdown
	ReasonHWPowerBrakeSlowdown = figure.ReasonHWPowerBrakeSlowdown
	ReasonDisplayClocks        = figure.ReasonDisplayClocks

	GPMSMActivity       = figure.GPMSMActivity
	GPMSMOccupancy      = figure.GPMSMOccupancy
	GPMGraphicsActivity = figure.GPMGraphicsActivity
	GPMTensorActivity   = figure.GPMTensorActivity
	GPMTensorHMMA       = figure.GPMTensorHMMA
	GPMTensorIMMA       = figure.GPMTensorIMMA
	GPMTensorDMMA       = figure.GPMTensorDMMA
	GPMTensorDFMA       = figure.GPMTensorDFMA
	GPMFP64             = figure.GPMFP64
	GPMFP32             = figure.GPMFP32
	GPMFP16             = figure.GPMFP16
	GPMInteger          = figure.GPMInteger
	GPMDRAMBandwidth    = figure.GPMDRAMBandwidth

	GPMPCIeTX   = figure.GPMPCIeTX
	GPMPCIeRX   = figure.GPMPCIeRX
	GPMNVLinkTX = figure.GPMNVLinkTX
	GPMNVLinkRX = figure.GPMNVLinkRX

	// NoInstance is NVML's "not a MIG instance" id.
	NoInstance = figure.NoInstance

	MPSNone   = figure.MPSNone
	MPSServer = figure.MPSServer
	MPSClient = figure.MPSClient
	// MPSServerName is the MPS server's executable name.
	MPSServerName = figure.MPSServerName
	// MaxProcessesPerGPU caps the process list read from one GPU.
	MaxProcessesPerGPU = figure.MaxProcessesPerGPU
)
