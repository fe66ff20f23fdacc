// Package figure names what internal/nvmlclient can read of a GPU, and
// holds what one read gives: a Figure (and the Figures set) is one thing
// that can be asked for, a Sample one GPU's reading of them. It knows
// neither NVML nor metric names, and imports nothing of nvmlclient: the
// read table (call) and the collectors (collect) fill a Sample, the
// receiver turns it into data points through nvmlclient's aliases.
package figure
