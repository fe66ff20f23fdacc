package call

// ID names one NVML read: a getter, one field of the per-GPU
// nvmlDeviceGetFieldValues batch, or a sample window.
type ID int

const (
	// None stands for a read that failed outside any NVML call, and is
	// the fallback of a row that has none.
	None ID = iota
	SamplesGPU
	SamplesMemory
	SamplesEncoder
	SamplesDecoder
	UtilizationRates
	EncoderUtilization
	DecoderUtilization
	MemoryInfo
	MIGMemoryInfo
	ComputeProcesses
	GraphicsProcesses
	ProcessUtilization
	MIGProcesses
	MPSProcesses
	GPMSampleGet
	GPMMetricsGet
	ECCCorrected
	ECCUncorrected
	RemappedRows
	ClockEventReasons
	FieldValues // the batch itself: its time and its own failure
	Check       // Device.Check's question
	// FirstPlain is the first plain read's (Table).
	FirstPlain
)
