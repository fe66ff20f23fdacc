// Package sample holds what one read of a GPU gives, the Sample, and names
// what can be asked of it: a Reading (and the Readings set) is one thing
// read by its own code (sample/readings.go). It knows
// neither NVML nor metric names, and imports nothing of nvmlclient: the
// read table (call) and the collectors (collect) fill a Sample, the
// receiver turns it into data points through nvmlclient's aliases.
package sample
