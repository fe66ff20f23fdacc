//go:build !cgo

package nvmlclient

import (
	"context"
	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient/sample"
	"time"

	"go.uber.org/zap"
)

// go-nvml loads libnvidia-ml.so.1 through cgo. A build without cgo (a
// laptop, a distribution built with CGO_ENABLED=0) gets this Client, which
// reports NVML as unavailable, so that everything else builds and runs.

// ErrNoCgo is the cause Open gives in a build without cgo.
var ErrNoCgo = &UnavailableError{
	Cause: "this build has no cgo, which loading libnvidia-ml.so.1 needs",
	Fix:   "use a build made with CGO_ENABLED=1, such as the otelcol-nvml image",
}

// Client is NVML's session; without cgo it never opens.
type Client struct {
	logger *zap.Logger
	opts   options
}

// Device is one GPU; without cgo there are none.
type Device struct {
	Info DeviceInfo
}

// NewSystem returns a Client whose Open says that NVML cannot be loaded.
func NewSystem(_ string, logger *zap.Logger, opts ...Option) *Client {
	c := &Client{logger: logger, opts: defaultOptions()}
	for _, o := range opts {
		o(&c.opts)
	}
	return c
}

// Open returns ErrNoCgo.
func (c *Client) Open([]string) error { return ErrNoCgo }

// Close does nothing: nothing was opened.
func (c *Client) Close(context.Context) error { return nil }

// Inventory is empty.
func (c *Client) Inventory() Inventory { return Inventory{} }

// Devices is empty.
func (c *Client) Devices() []*Device { return nil }

// WatchEvents returns ErrNotOpen.
func (c *Client) WatchEvents(context.Context, func(Event), time.Duration) error { return ErrNotOpen }

// Lost is false: there is no device to lose.
func (d *Device) Lost() bool { return false }

// Prime returns ErrNotOpen.
func (d *Device) Prime() error { return ErrNotOpen }

// Read returns ErrNotOpen.
func (d *Device) Read() (sample.Sample, error) { return sample.Sample{}, ErrNotOpen }

// Check reports ErrNotOpen: without cgo there is no NVML.
func (d *Device) Check() error { return ErrNotOpen }
