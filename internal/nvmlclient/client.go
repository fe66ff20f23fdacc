//go:build cgo

package nvmlclient

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"go.uber.org/zap"

	"github.com/otelcol-nvml/otelcol-nvml/internal/logonce"
	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient/call"
	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient/guard"
	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient/raw"
)

// Client owns one NVML session: Open initializes NVML and takes the inventory,
// Close shuts NVML down. It is safe for concurrent use.
type Client struct {
	lib    nvml.Interface
	logger *zap.Logger
	opts   options
	// libraryPath is set for the system library (NewSystem): it is checked
	// before nvmlInit, and the bounded list calls are looked up in it.
	libraryPath string
	system      bool

	// mu guards the state below; no NVML call is made under it, so that a
	// stuck call never blocks Devices, Inventory or Close.
	mu      sync.Mutex
	open    bool
	opening bool
	inv     Inventory
	devices []*Device
	calls   *guard.Inflight // the calls of the open session
	sampler *shareSampler
	// lost remembers, across the sessions of the client, the GPUs logged
	// lost: while every GPU stays lost the receiver re-initializes NVML
	// now and then, and each session has new Devices. A GPU is logged lost
	// again only after it read again in between.
	lost *logonce.Log
}

// maxLostLogged bounds the memory of GPUs logged lost: far above the GPUs
// of one host.
const maxLostLogged = 256

// New returns a Client on lib, which is not touched until Open.
func New(lib nvml.Interface, logger *zap.Logger, opts ...Option) *Client {
	c := &Client{lib: lib, logger: logger, opts: defaultOptions(), lost: logonce.New(maxLostLogged)}
	for _, o := range opts {
		o(&c.opts)
	}
	return c
}

// NewSystem returns a Client on the system's libnvidia-ml.so.1, or on the
// library at libraryPath when it is not empty. Nothing is loaded until Open.
func NewSystem(libraryPath string, logger *zap.Logger, opts ...Option) *Client {
	var c *Client
	if libraryPath == "" {
		c = New(nvml.New(), logger, opts...)
	} else {
		c = New(nvml.New(nvml.WithLibraryPath(libraryPath)), logger, opts...)
	}
	c.libraryPath, c.system = libraryPath, true
	return c
}

// ErrOpening is returned by Open while another Open is still running.
var ErrOpening = errors.New("NVML is being initialized")

// Open initializes NVML and takes the inventory of the devices that match
// selectors (UUIDs or indices; all devices when empty). On error NVML is left
// uninitialized and Open may be called again later. The devices are not
// started: each takes its baselines on its first Prime or Read.
func (c *Client) Open(selectors []string) error {
	c.mu.Lock()
	if c.open {
		c.mu.Unlock()
		return nil
	}
	if c.opening {
		c.mu.Unlock()
		return ErrOpening
	}
	c.opening = true
	c.mu.Unlock()

	inv, devices, calls, err := c.initialize(selectors)

	c.mu.Lock()
	defer c.mu.Unlock()
	c.opening = false
	if err != nil {
		return err
	}
	c.inv, c.devices, c.calls, c.open = inv, devices, calls, true
	c.sampler = startShareSampler(devices, c.opts.shareInterval)
	return nil
}

func (c *Client) initialize(selectors []string) (Inventory, []*Device, *guard.Inflight, error) {
	if c.system {
		// A library that is missing, or is not NVML, must be refused here:
		// go-nvml would call nvmlInit in it and the process would die on an
		// unresolved symbol (exit 127).
		if err := checkLibrary(c.libraryPath); err != nil {
			return Inventory{}, nil, nil, err
		}
	}
	calls := guard.NewInflight()
	calls.Begin() // a new session's: it always begins
	defer calls.End()
	if ret := c.lib.Init(); ret != nvml.SUCCESS {
		// After a failed Init no other NVML function may be called: with the
		// library missing, the process would die on an unresolved symbol.
		return Inventory{}, nil, nil, initError(ret)
	}
	var rawLib *raw.Lib
	if c.system {
		rawLib = raw.Load(c.libraryPath)
	}
	inv, devices, err := takeInventory(c.lib, c.logger, selectors, c.opts)
	if err != nil {
		c.lib.Shutdown()
		return inv, nil, nil, err
	}
	sess := &call.Session{Calls: calls, Lane: guard.NewLane(), GPM: guard.NewGPMGate(), Raw: rawLib, Lost: c.lost}
	for _, d := range devices {
		d.gpu.Session = sess
	}
	return inv, devices, calls, nil
}

// Close shuts NVML down. It is a no-op when NVML is not open. The client
// is closed at once (a later Open initializes NVML again), but nvmlShutdown
// waits for the calls still running in NVML, at most until ctx is done:
// then Close returns an InFlightError and NVML is shut down only once those
// calls return, as shutting it down under them could crash the process.
func (c *Client) Close(ctx context.Context) error {
	c.mu.Lock()
	if !c.open {
		c.mu.Unlock()
		return nil
	}
	devices, calls, sampler := c.devices, c.calls, c.sampler
	c.open, c.devices, c.inv, c.calls, c.sampler = false, nil, Inventory{}, nil, nil
	c.mu.Unlock()
	sampler.close()

	shutdown := func() error {
		for _, d := range devices {
			d.release()
		}
		if ret := c.lib.Shutdown(); ret != nvml.SUCCESS {
			return fmt.Errorf("nvmlShutdown: %w", ret)
		}
		return nil
	}
	calls.Close()
	if calls.Wait(ctx) {
		return shutdown()
	}
	n := calls.Count()
	go func() {
		calls.Wait(context.Background())
		_ = shutdown()
	}()
	return &guard.InFlightError{Calls: n}
}

// Inventory returns what was found at the last Open; MIG devices are
// listed once their GPU has its baselines, as its reads last listed them.
func (c *Client) Inventory() Inventory {
	c.mu.Lock()
	inv, devices := c.inv, c.devices
	c.mu.Unlock()
	inv.MIGDevices = nil
	for _, d := range devices {
		if d.state.baselines.Load() {
			inv.MIGDevices = append(inv.MIGDevices, d.collectors.MIGDevices()...)
		}
	}
	return inv
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

// PrimeAll takes every device's baselines at once and waits for them all:
// for tools and tests. The receiver primes each GPU under a scrape's
// deadline.
func (c *Client) PrimeAll() {
	var wg sync.WaitGroup
	for _, d := range c.Devices() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = d.Prime()
		}()
	}
	wg.Wait()
}
