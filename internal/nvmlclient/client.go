//go:build cgo

package nvmlclient

import (
	"fmt"
	"sync"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"go.uber.org/zap"
)

// Client owns one NVML session: Open initializes NVML and takes the inventory,
// Close shuts NVML down. It is safe for concurrent use.
type Client struct {
	lib    nvml.Interface
	logger *zap.Logger
	opts   options

	mu      sync.Mutex
	open    bool
	inv     Inventory
	devices []*Device
}

// New returns a Client on lib, which is not touched until Open.
func New(lib nvml.Interface, logger *zap.Logger, opts ...Option) *Client {
	c := &Client{lib: lib, logger: logger, opts: options{now: time.Now, counterInterval: DefaultCounterInterval}}
	for _, o := range opts {
		o(&c.opts)
	}
	return c
}

// NewSystem returns a Client on the system's libnvidia-ml.so.1, or on the
// library at libraryPath when it is not empty. Nothing is loaded until Open.
func NewSystem(libraryPath string, logger *zap.Logger, opts ...Option) *Client {
	if libraryPath == "" {
		return New(nvml.New(), logger, opts...)
	}
	return New(nvml.New(nvml.WithLibraryPath(libraryPath)), logger, opts...)
}

// Open initializes NVML and takes the inventory of the devices that match
// selectors (UUIDs or indices; all devices when empty). On error NVML is left
// uninitialized and Open may be called again later.
func (c *Client) Open(selectors []string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.open {
		return nil
	}
	if ret := c.lib.Init(); ret != nvml.SUCCESS {
		// After a failed Init no other NVML function may be called: with the
		// library missing, the process would die on an unresolved symbol.
		return initError(ret)
	}
	inv, devices, err := takeInventory(c.lib, c.logger, selectors, c.opts)
	if err != nil {
		c.lib.Shutdown()
		return err
	}
	c.inv, c.devices, c.open = inv, devices, true
	return nil
}

// Close shuts NVML down. It is a no-op when NVML is not open.
func (c *Client) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.open {
		return nil
	}
	for _, d := range c.devices {
		if !d.waitBackground(2 * time.Second) {
			// Shutting NVML down under a running call could crash the
			// process: leave the library to the process's exit.
			c.open, c.devices, c.inv = false, nil, Inventory{}
			c.logger.Warn("A background NVML counter read is still running at close; not shutting NVML down")
			return nil
		}
	}
	for _, d := range c.devices {
		d.gpm.free()
		for _, m := range d.migs {
			m.gpm.free()
		}
	}
	c.open, c.devices, c.inv = false, nil, Inventory{}
	if ret := c.lib.Shutdown(); ret != nvml.SUCCESS {
		return fmt.Errorf("nvmlShutdown: %w", ret)
	}
	return nil
}

// Inventory returns what was found at the last Open.
func (c *Client) Inventory() Inventory {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.inv
}

// Devices returns the devices taken at the last Open, in index order.
func (c *Client) Devices() []*Device {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.devices
}

func initError(ret nvml.Return) error {
	e := &UnavailableError{Err: ret}
	switch ret {
	case nvml.ERROR_LIBRARY_NOT_FOUND:
		e.Cause = "libnvidia-ml.so.1 could not be loaded"
		e.Fix = "is the NVIDIA driver installed, and mounted into the container (NVIDIA container toolkit)? " +
			"Set library_path to the library's full path if it is outside the loader's search path"
	case nvml.ERROR_DRIVER_NOT_LOADED:
		e.Cause = "the NVIDIA kernel driver is not loaded"
		e.Fix = "load the driver (nvidia-smi should work on the host); the receiver retries on its own"
	case nvml.ERROR_NO_PERMISSION:
		e.Cause = "no permission to open the GPU device nodes"
		e.Fix = "give the collector read access to /dev/nvidiactl and /dev/nvidia*"
	default:
		e.Cause = "nvmlInit failed: " + ret.Error()
		e.Fix = "check that nvidia-smi works where the collector runs; the receiver retries on its own"
	}
	return e
}
