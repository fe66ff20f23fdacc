package nvmlclient

// call names one NVML getter, for the per-device "not supported" cache and
// for log messages.
type call int

const (
	callSamplesGPU call = iota
	callSamplesMemory
	callSamplesEncoder
	callSamplesDecoder
	callUtilizationRates
	callEncoderUtilization
	callDecoderUtilization
	callMemoryInfo
	callMIGMemoryInfo
	callTemperature
	callMemoryTemperature
	callPowerUsage
	callPowerLimit
	callEnergy
	callClockSM
	callClockMemory
	callClockGraphics
	callClockVideo
	callPerformanceState
	callFanSpeed
	callComputeProcesses
	callGraphicsProcesses
	callProcessUtilization
	callGPMSampleGet
	callGPMMetricsGet
	callECCCorrected
	callECCUncorrected
	callRemappedRows
	callClockEventReasons
	callViolationPower
	callViolationThermal
	callViolationSyncBoost
	callViolationBoardLimit
	callViolationLowUtilization
	callViolationReliability
	callPCIeReplays
	callPCIeGeneration
	callPCIeWidth
	callCount
)

var callNames = [callCount]string{
	callSamplesGPU:              "nvmlDeviceGetSamples(GPU_UTILIZATION_SAMPLES)",
	callSamplesMemory:           "nvmlDeviceGetSamples(MEMORY_UTILIZATION_SAMPLES)",
	callSamplesEncoder:          "nvmlDeviceGetSamples(ENC_UTILIZATION_SAMPLES)",
	callSamplesDecoder:          "nvmlDeviceGetSamples(DEC_UTILIZATION_SAMPLES)",
	callUtilizationRates:        "nvmlDeviceGetUtilizationRates",
	callEncoderUtilization:      "nvmlDeviceGetEncoderUtilization",
	callDecoderUtilization:      "nvmlDeviceGetDecoderUtilization",
	callMemoryInfo:              "nvmlDeviceGetMemoryInfo",
	callMIGMemoryInfo:           "nvmlDeviceGetMemoryInfo(MIG device)",
	callTemperature:             "nvmlDeviceGetTemperature",
	callMemoryTemperature:       "nvmlDeviceGetFieldValues(FI_DEV_MEMORY_TEMP)",
	callPowerUsage:              "nvmlDeviceGetPowerUsage",
	callPowerLimit:              "nvmlDeviceGetEnforcedPowerLimit",
	callEnergy:                  "nvmlDeviceGetTotalEnergyConsumption",
	callClockSM:                 "nvmlDeviceGetClockInfo(SM)",
	callClockMemory:             "nvmlDeviceGetClockInfo(MEM)",
	callClockGraphics:           "nvmlDeviceGetClockInfo(GRAPHICS)",
	callClockVideo:              "nvmlDeviceGetClockInfo(VIDEO)",
	callPerformanceState:        "nvmlDeviceGetPerformanceState",
	callFanSpeed:                "nvmlDeviceGetFanSpeed",
	callComputeProcesses:        "nvmlDeviceGetComputeRunningProcesses",
	callGraphicsProcesses:       "nvmlDeviceGetGraphicsRunningProcesses",
	callProcessUtilization:      "nvmlDeviceGetProcessUtilization",
	callGPMSampleGet:            "nvmlGpmSampleGet",
	callGPMMetricsGet:           "nvmlGpmMetricsGet",
	callECCCorrected:            "nvmlDeviceGetTotalEccErrors(CORRECTED)",
	callECCUncorrected:          "nvmlDeviceGetTotalEccErrors(UNCORRECTED)",
	callRemappedRows:            "nvmlDeviceGetRemappedRows",
	callClockEventReasons:       "nvmlDeviceGetCurrentClocksEventReasons",
	callViolationPower:          "nvmlDeviceGetViolationStatus(POWER)",
	callViolationThermal:        "nvmlDeviceGetViolationStatus(THERMAL)",
	callViolationSyncBoost:      "nvmlDeviceGetViolationStatus(SYNC_BOOST)",
	callViolationBoardLimit:     "nvmlDeviceGetViolationStatus(BOARD_LIMIT)",
	callViolationLowUtilization: "nvmlDeviceGetViolationStatus(LOW_UTILIZATION)",
	callViolationReliability:    "nvmlDeviceGetViolationStatus(RELIABILITY)",
	callPCIeReplays:             "nvmlDeviceGetPcieReplayCounter",
	callPCIeGeneration:          "nvmlDeviceGetCurrPcieLinkGeneration",
	callPCIeWidth:               "nvmlDeviceGetCurrPcieLinkWidth",
}

// callSymbols names the C symbol behind each call whose presence is checked
// at Open: calling a symbol the library lacks kills the process. Calls not
// listed here exist in every driver this receiver supports.
var callSymbols = map[call]string{
	callMemoryTemperature:       "nvmlDeviceGetFieldValues",
	callComputeProcesses:        "nvmlDeviceGetComputeRunningProcesses",
	callGraphicsProcesses:       "nvmlDeviceGetGraphicsRunningProcesses",
	callProcessUtilization:      "nvmlDeviceGetProcessUtilization",
	callECCCorrected:            "nvmlDeviceGetTotalEccErrors",
	callECCUncorrected:          "nvmlDeviceGetTotalEccErrors",
	callRemappedRows:            "nvmlDeviceGetRemappedRows",
	callClockEventReasons:       "nvmlDeviceGetCurrentClocksEventReasons",
	callViolationPower:          "nvmlDeviceGetViolationStatus",
	callViolationThermal:        "nvmlDeviceGetViolationStatus",
	callViolationSyncBoost:      "nvmlDeviceGetViolationStatus",
	callViolationBoardLimit:     "nvmlDeviceGetViolationStatus",
	callViolationLowUtilization: "nvmlDeviceGetViolationStatus",
	callViolationReliability:    "nvmlDeviceGetViolationStatus",
	callPCIeReplays:             "nvmlDeviceGetPcieReplayCounter",
	callPCIeGeneration:          "nvmlDeviceGetCurrPcieLinkGeneration",
	callPCIeWidth:               "nvmlDeviceGetCurrPcieLinkWidth",
}

func (c call) String() string { return callNames[c] }
