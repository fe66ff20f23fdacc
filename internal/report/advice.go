package report

import "strings"

// DefaultRunbookURL is the runbook the advice links to, one section per
// state (#idle, #input_bound, ...).
const DefaultRunbookURL = "https://github.com/otelcol-nvml/otelcol-nvml/blob/main/docs/operations/runbook.md"

// stateOrder ranks the diagnosis states by how much they ask of the holder:
// a tie in time goes to the first.
var stateOrder = []string{"memory_pressure", "input_bound", "idle", "underused", "gpu_bound"}

func stateRank(s string) int {
	for i, st := range stateOrder {
		if st == s {
			return i
		}
	}
	return len(stateOrder)
}

// Advice is one short line per diagnosis state (the runbook has the rest).
var Advice = map[string]string{
	"idle":            "The GPU was held and did nothing: release it when the work is done (end the job or pod, scale to zero), or find what the job waits for.",
	"input_bound":     "The GPU waited on the CPU: raise the DataLoader's num_workers, set pin_memory=True and persistent_workers=True, raise the CPU limit, or decode on the GPU.",
	"memory_pressure": "Memory was at its limit: lower the batch size, use mixed precision or activation checkpointing, or move to a GPU with more memory.",
	"underused":       "The GPU worked part of the time: give it more work per step (larger batches, fewer synchronizations), or share it (MIG, time-slicing).",
	"gpu_bound":       "The GPU was busy, as it should be: nothing to fix.",
}

// RunbookLink is the runbook section of a state; none for gpu_bound, which
// has nothing to fix.
func RunbookLink(base, state string) string {
	if base == "" || state == "" || state == "gpu_bound" {
		return ""
	}
	return strings.TrimRight(base, "#") + "#" + state
}

// adviceFor is the advice of a state, or "".
func adviceFor(state string) string { return Advice[state] }
