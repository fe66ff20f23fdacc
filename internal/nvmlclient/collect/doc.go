// Package collect holds a GPU's collectors, each one part of the read in
// one file with its type, plan, state and read: activity (GPM's windows
// and the utilization samples), getters, processes, fields, health, MIG and
// the counters. They read through a call.GPU and a call.Reading, and fill
// a reading.Sample; nvmlclient's Device holds one Set of them.
package collect
