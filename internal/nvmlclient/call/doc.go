// Package call is how nvmlclient calls NVML: the read table (every NVML
// read of a GPU, the readings it answers, and for a plain reading how its
// value lands in the Sample), the one way a call is made (Reading: whether
// it is made, its timing, its answer classified) and what a GPU's calls
// answered (GPU: the support cache, the failures logged once, the
// timings, the panics). It imports reading, guard and raw, and nothing
// above them: the collectors (collect) read through a GPU and a Reading.
package call
