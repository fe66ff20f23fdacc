// Package guard holds what orders the NVML calls of a session and knows
// nothing of what they read: the lane (one GPU's reads at a time), the GPM
// gate, a device's one use at a time, and the count of calls in flight that
// Close waits for. It imports nothing of nvmlclient.
package guard
