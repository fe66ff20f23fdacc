//go:build cgo

package nvmlclient

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"go.uber.org/zap"
)

const watchedEvents = nvml.EventTypeXidCriticalError | nvml.EventTypeSingleBitEccError | nvml.EventTypeDoubleBitEccError

// eventWaitMillis bounds one wait, hence how long Shutdown waits for the
// watcher to notice.
const eventWaitMillis = 500

// WatchEvents registers every device for XID and ECC events and calls
// onEvent for each, from this goroutine, until ctx is done. It returns nil
// when ctx ends it.
func (c *Client) WatchEvents(ctx context.Context, onEvent func(Event)) (err error) {
	c.mu.Lock()
	open, devices, lib := c.open, c.devices, c.lib
	c.mu.Unlock()
	if !open {
		return ErrNotOpen
	}
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
	defer set.Free()

	byUUID := map[string]DeviceInfo{}
	for _, d := range devices {
		supported, ret := d.handle.GetSupportedEventTypes()
		if ret != nvml.SUCCESS || supported&watchedEvents == 0 {
			d.logger.Info("GPU reports no XID or ECC events; none are watched on it")
			continue
		}
		if ret := d.handle.RegisterEvents(supported&watchedEvents, set); ret != nvml.SUCCESS {
			d.logger.Warn("Cannot register for XID and ECC events on this GPU", zap.String("nvml.return", ret.Error()))
			continue
		}
		byUUID[d.Info.UUID] = d.Info
	}
	if len(byUUID) == 0 {
		return ErrNoEvents
	}

	for ctx.Err() == nil {
		data, ret := set.Wait(eventWaitMillis)
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
		if data.Device != nil {
			if uuid, ret := data.Device.GetUUID(); ret == nvml.SUCCESS {
				ev.Device = byUUID[uuid]
			}
		}
		if ev.Device.UUID == "" {
			continue // not one of ours
		}
		onEvent(ev)
	}
	return nil
}
