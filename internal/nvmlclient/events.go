//go:build cgo

package nvmlclient

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"go.uber.org/zap"

	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient/guard"
)

const watchedEvents = nvml.EventTypeXidCriticalError | nvml.EventTypeSingleBitEccError | nvml.EventTypeDoubleBitEccError

// WatchEvents registers every device for XID and ECC events and calls
// onEvent for each, from this goroutine, until ctx is done. It returns nil
// when ctx ends it. Each GPU registers on its own goroutine, under
// registerTimeout: a GPU whose registration fails or hangs is named in one
// log line, and the others keep their events.
func (c *Client) WatchEvents(ctx context.Context, onEvent func(Event), registerTimeout time.Duration) (err error) {
	c.mu.Lock()
	open, devices, lib, calls := c.open, c.devices, c.lib, c.calls
	c.mu.Unlock()
	if !open || !calls.Begin() {
		return ErrNotOpen
	}
	defer calls.End()
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic in the NVML event loop: %v", p)
		}
	}()
	if ext := lib.Extensions(); ext == nil || ext.LookupSymbol("nvmlEventSetCreate") != nil ||
		ext.LookupSymbol("nvmlDeviceRegisterEvents") != nil || ext.LookupSymbol("nvmlEventSetWait") != nil {
		return errors.New("this NVML has no event API")
	}
	set, ret := lib.EventSetCreate()
	if ret != nvml.SUCCESS {
		return fmt.Errorf("nvmlEventSetCreate: %w", ret)
	}
	byUUID, stuck := registerEvents(c.logger, devices, set, calls, registerTimeout)
	if stuck == 0 {
		// Freeing the set under a registration still running in it is not
		// safe: a stuck one leaves the set behind.
		defer set.Free()
	}
	if len(byUUID) == 0 {
		return ErrNoEvents
	}
	for ctx.Err() == nil {
		// nvmlEventSetWait cannot be interrupted: ctx is seen between
		// waits, so one wait bounds how long a stop takes to be noticed.
		data, ret := set.Wait(uint32(c.opts.eventWait / time.Millisecond))
		if ctx.Err() != nil {
			return nil // stopped during the wait: its event is not this watcher's to deliver
		}
		switch ret {
		case nvml.SUCCESS:
		case nvml.ERROR_TIMEOUT:
			continue
		default:
			// An interrupted wait or a transient error: back off briefly.
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
			continue
		}
		ev := Event{Time: time.Now(), GPUInstanceID: data.GpuInstanceId, ComputeInstanceID: data.ComputeInstanceId}
		switch {
		case data.EventType&nvml.EventTypeXidCriticalError != 0:
			ev.Kind, ev.XID = EventXID, data.EventData
		case data.EventType&nvml.EventTypeDoubleBitEccError != 0:
			ev.Kind = EventDoubleBitECC
		case data.EventType&nvml.EventTypeSingleBitEccError != 0:
			ev.Kind = EventSingleBitECC
		default:
			continue
		}
		ev.Device = eventDevice(data.Device, devices, byUUID)
		if ev.Device.UUID == "" {
			continue // not one of ours
		}
		onEvent(ev)
	}
	return nil
}

// registerEvents registers each device on its own goroutine and waits for
// them at most timeout. It returns the registered devices and how many
// registrations are still running.
func registerEvents(logger *zap.Logger, devices []*Device, set nvml.EventSet, calls *guard.Inflight, timeout time.Duration) (map[string]DeviceInfo, int) {
	type result struct {
		d      *Device
		reason string // empty: registered
	}
	results := make(chan result, len(devices))
	for _, d := range devices {
		if !calls.Begin() {
			results <- result{d, "the session is closing"}
			continue
		}
		go func() {
			defer calls.End()
			defer func() {
				if p := recover(); p != nil {
					results <- result{d, fmt.Sprintf("panic: %v", p)}
				}
			}()
			supported, ret := d.gpu.Handle.GetSupportedEventTypes()
			if ret != nvml.SUCCESS || supported&watchedEvents == 0 {
				d.gpu.Logger.Info("GPU reports no XID or ECC events; none are watched on it")
				results <- result{d, "unsupported"}
				return
			}
			if ret := d.gpu.Handle.RegisterEvents(supported&watchedEvents, set); ret != nvml.SUCCESS {
				results <- result{d, "nvmlDeviceRegisterEvents: " + ret.Error()}
				return
			}
			results <- result{d, ""}
		}()
	}
	byUUID := map[string]DeviceInfo{}
	answered := map[*Device]bool{}
	var failed []string
	timer := time.NewTimer(timeout)
	defer timer.Stop()
wait:
	for range devices {
		select {
		case r := <-results:
			answered[r.d] = true
			switch r.reason {
			case "":
				byUUID[r.d.Info.UUID] = r.d.Info
			case "unsupported":
			default:
				failed = append(failed, r.d.Info.UUID+" ("+r.reason+")")
			}
		case <-timer.C:
			break wait
		}
	}
	stuck := 0
	for _, d := range devices {
		if !answered[d] {
			stuck++
			failed = append(failed, d.Info.UUID+" (nvmlDeviceRegisterEvents did not return in "+timeout.String()+")")
		}
	}
	if len(failed) > 0 {
		logger.Warn("Not watching XID and ECC events on these GPUs; the others keep theirs",
			zap.Strings("gpus", failed))
	}
	return byUUID, stuck
}

// eventDevice finds the watched device an event names: by its handle
// first, as a GPU that just fell off the bus (Xid 79) no longer answers
// nvmlDeviceGetUUID, then by UUID.
func eventDevice(h nvml.Device, devices []*Device, byUUID map[string]DeviceInfo) (info DeviceInfo) {
	if h == nil {
		return DeviceInfo{}
	}
	func() {
		defer func() { _ = recover() }() // a handle type that is not comparable
		for _, d := range devices {
			if d.gpu.Handle == h {
				info = byUUID[d.Info.UUID]
				return
			}
		}
	}()
	if info.UUID != "" {
		return info
	}
	if uuid, ret := h.GetUUID(); ret == nvml.SUCCESS {
		return byUUID[uuid]
	}
	return DeviceInfo{}
}
