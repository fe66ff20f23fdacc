package nvmlclient

import (
	"errors"
	"fmt"
	"time"
)

// EventKind names the critical NVML events the receiver watches.
type EventKind int

const (
	EventXID EventKind = iota
	EventSingleBitECC
	EventDoubleBitECC
)

func (k EventKind) String() string {
	switch k {
	case EventXID:
		return "xid"
	case EventSingleBitECC:
		return "ecc.single_bit"
	case EventDoubleBitECC:
		return "ecc.double_bit"
	default:
		return fmt.Sprintf("EventKind(%d)", int(k))
	}
}

// Event is one critical event of one GPU.
type Event struct {
	Time   time.Time
	Device DeviceInfo
	Kind   EventKind
	// XID is the Xid code for EventXID (e.g. 79: fallen off the bus).
	XID uint64
	// GPUInstanceID and ComputeInstanceID place the event on a MIG slice;
	// NoInstance otherwise.
	GPUInstanceID, ComputeInstanceID uint32
}

// ErrNoEvents says no watched device supports the watched events.
var ErrNoEvents = errors.New("no GPU supports XID or ECC events")
