//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"testing"
)

// The scenario format of test/fakenvml (see its README.md), as Go types,
// so that a test states its scenario and its expectations in one place. The
// library parses the JSON; these types only write it.

type Scenario struct {
	Comment           string      `json:"comment,omitempty"`
	DriverVersion     string      `json:"driver_version,omitempty"`
	NVMLVersion       string      `json:"nvml_version,omitempty"`
	CUDADriverVersion int         `json:"cuda_driver_version,omitempty"`
	Sampling          *Sampling   `json:"sampling,omitempty"`
	Init              *InitFaults `json:"init,omitempty"`
	GPUs              []GPU       `json:"gpus"`
}

type Sampling struct {
	Hz     float64 `json:"hz,omitempty"`
	Buffer int     `json:"buffer,omitempty"`
}

type InitFaults struct {
	FailFirst int    `json:"fail_first"`
	Return    string `json:"return,omitempty"`
}

// Signal is a value over time: a number, Sine or Steps.
type Signal = any

type Sine struct {
	Mean      float64 `json:"mean"`
	Amplitude float64 `json:"amplitude"`
	PeriodS   float64 `json:"period_s"`
	PhaseS    float64 `json:"phase_s,omitempty"`
}

// Steps is piecewise constant: [[t, value], ...].
type Steps struct {
	Steps [][2]float64 `json:"steps"`
}

type Duty struct {
	Busy    Signal  `json:"busy"`
	PeriodS float64 `json:"period_s,omitempty"`
	PhaseS  float64 `json:"phase_s,omitempty"`
}

type Utilization struct {
	GPU     *Duty `json:"gpu,omitempty"`
	Memory  *Duty `json:"memory,omitempty"`
	Encoder *Duty `json:"encoder,omitempty"`
	Decoder *Duty `json:"decoder,omitempty"`
}

type Memory struct {
	TotalBytes    uint64 `json:"total_bytes"`
	ReservedBytes uint64 `json:"reserved_bytes,omitempty"`
	UsedBytes     Signal `json:"used_bytes,omitempty"`
}

type Clocks struct {
	Graphics Signal `json:"graphics,omitempty"`
	SM       Signal `json:"sm,omitempty"`
	Memory   Signal `json:"memory,omitempty"`
	Video    Signal `json:"video,omitempty"`
}

type Process struct {
	PID             uint32   `json:"pid"`
	Name            string   `json:"name,omitempty"`
	UsedMemoryBytes uint64   `json:"used_memory_bytes,omitempty"`
	Type            string   `json:"type,omitempty"`
	From            float64  `json:"from,omitempty"`
	Until           *float64 `json:"until,omitempty"`
	SMPercent       Signal   `json:"sm_percent,omitempty"`
	MemoryPercent   Signal   `json:"memory_percent,omitempty"`
	EncoderPercent  Signal   `json:"encoder_percent,omitempty"`
	DecoderPercent  Signal   `json:"decoder_percent,omitempty"`
	// The MIG device it runs on (MIG mode only).
	GPUInstanceID     *int `json:"gpu_instance_id,omitempty"`
	ComputeInstanceID *int `json:"compute_instance_id,omitempty"`
	// MPS is "server" or "client" under CUDA MPS (test/fakenvml/README.md).
	MPS string `json:"mps,omitempty"`
}

type Fault struct {
	Call   string   `json:"call"`
	Return string   `json:"return"`
	From   float64  `json:"from,omitempty"`
	Until  *float64 `json:"until,omitempty"`
}

type Hang struct {
	Call    string  `json:"call"`
	From    float64 `json:"from"`
	Seconds float64 `json:"seconds"`
}

type GPU struct {
	Comment            string       `json:"comment,omitempty"`
	Name               string       `json:"name,omitempty"`
	UUID               string       `json:"uuid,omitempty"`
	Serial             string       `json:"serial,omitempty"`
	PCIBusID           string       `json:"pci_bus_id,omitempty"`
	Architecture       string       `json:"architecture,omitempty"`
	Utilization        *Utilization `json:"utilization,omitempty"`
	Memory             *Memory      `json:"memory,omitempty"`
	TemperatureC       Signal       `json:"temperature_c,omitempty"`
	MemoryTemperatureC Signal       `json:"memory_temperature_c,omitempty"`
	// The getter table's keys (test/fakenvml/README.md), over its defaults
	// (test/nvmltest/getters.json): a getter's name, or name(SELECTOR); a
	// nil value makes the getter NOT_SUPPORTED.
	Getters map[string]Signal `json:"getters,omitempty"`
	// Getters under names of their own: MarshalJSON writes them into Getters.
	MarginTemperatureC Signal            `json:"-"` // nvmlDeviceGetMarginTemperature
	PCIeTxKiBs         Signal            `json:"-"` // nvmlDeviceGetPcieThroughput(TX_BYTES)
	PCIeRxKiBs         Signal            `json:"-"` // nvmlDeviceGetPcieThroughput(RX_BYTES)
	PowerW             Signal            `json:"power_w,omitempty"`
	PowerLimitW        Signal            `json:"power_limit_w,omitempty"`
	FanPercent         Signal            `json:"fan_percent,omitempty"`
	EnergyOffsetJ      float64           `json:"energy_offset_j,omitempty"`
	ClocksMHz          *Clocks           `json:"clocks_mhz,omitempty"`
	PState             Signal            `json:"pstate,omitempty"`
	Processes          any               `json:"processes,omitempty"` // []Process; nil: no key (not supported)
	GPM                map[string]Signal `json:"gpm,omitempty"`
	ECCErrors          map[string]Signal `json:"ecc_errors,omitempty"`
	RemappedRows       map[string]Signal `json:"remapped_rows,omitempty"`
	ClocksEventReasons Signal            `json:"clocks_event_reasons,omitempty"`
	Violation          map[string]Signal `json:"violation,omitempty"`
	PCIe               map[string]Signal `json:"pcie,omitempty"`
	Fields             map[string]Signal `json:"fields,omitempty"` // field values by NVML id
	NVLinkLinks        int               `json:"nvlink_links,omitempty"`
	Events             []Event           `json:"events,omitempty"`
	MIG                *MIG              `json:"mig,omitempty"`
	LostAt             *float64          `json:"lost_at,omitempty"`
	NotSupported       []string          `json:"not_supported,omitempty"`
	Errors             []Fault           `json:"errors,omitempty"`
	Hangs              []Hang            `json:"hangs,omitempty"`
}

// MarshalJSON writes the getters named by fields of their own into the
// getters block.
func (g GPU) MarshalJSON() ([]byte, error) {
	type plain GPU
	p := plain(g)
	p.Getters = maps.Clone(g.Getters)
	named := map[string]Signal{"nvmlDeviceGetMarginTemperature": g.MarginTemperatureC,
		"nvmlDeviceGetPcieThroughput(TX_BYTES)": g.PCIeTxKiBs, "nvmlDeviceGetPcieThroughput(RX_BYTES)": g.PCIeRxKiBs}
	for k, v := range named {
		if v == nil {
			continue
		}
		if _, dup := g.Getters[k]; dup {
			return nil, fmt.Errorf("getter %s is given twice, in Getters and by its field", k)
		}
		if p.Getters == nil {
			p.Getters = map[string]Signal{}
		}
		p.Getters[k] = v
	}
	return json.Marshal(p)
}

type Event struct {
	At   float64 `json:"at"`
	Type string  `json:"type,omitempty"` // xid (default), single_bit_ecc, double_bit_ecc, pstate, clock
	XID  int     `json:"xid,omitempty"`
	// The GPU instance (and compute instance) the event hit, in MIG mode.
	GPUInstanceID     *int `json:"gpu_instance_id,omitempty"`
	ComputeInstanceID *int `json:"compute_instance_id,omitempty"`
	// MPS is "server" or "client" under CUDA MPS (test/fakenvml/README.md).
	MPS string `json:"mps,omitempty"`
}

// MIG is a GPU's Multi-Instance GPU setup.
type MIG struct {
	Enabled      *bool         `json:"enabled,omitempty"` // nil: true
	MaxDevices   int           `json:"max_devices,omitempty"`
	Profiles     []MIGProfile  `json:"profiles,omitempty"`
	GPUInstances []GPUInstance `json:"gpu_instances,omitempty"`
	Devices      []MIGDevice   `json:"devices,omitempty"`
}

// MIGProfile is a GPU instance profile: Profile is its
// NVML_GPU_INSTANCE_PROFILE_* index, ID the profile ID its GPU instances
// carry.
type MIGProfile struct {
	Profile    int    `json:"profile"`
	ID         int    `json:"id"`
	SliceCount int    `json:"slice_count"`
	MemoryMiB  uint64 `json:"memory_mib"`
	Name       string `json:"name,omitempty"`
}

type GPUInstance struct {
	ID        int `json:"id"`
	ProfileID int `json:"profile_id"`
	// PlacementStart is the GPU instance's placement start; nil: right
	// after the previous instance.
	PlacementStart *int              `json:"placement_start,omitempty"`
	Memory         *Memory           `json:"memory,omitempty"`
	GPM            map[string]Signal `json:"gpm,omitempty"`
}

type MIGDevice struct {
	UUID              string `json:"uuid"`
	GPUInstanceID     int    `json:"gpu_instance_id"`
	ComputeInstanceID int    `json:"compute_instance_id"`
	// From and Until bound when the MIG device exists: a layout change
	// without a driver reload.
	From  float64  `json:"from,omitempty"`
	Until *float64 `json:"until,omitempty"`
}

func ptr[T any](v T) *T { return &v }

// write saves the scenario as JSON in a temporary directory of t.
func (s Scenario) write(t testing.TB) string {
	t.Helper()
	data, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "scenario.json")
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// signalAt is s (a number or Steps) at scenario time t, as the library
// computes it.
func signalAt(s Signal, t float64) float64 {
	switch v := s.(type) {
	case int:
		return float64(v)
	case float64:
		return v
	case Steps:
		out := v.Steps[0][1] // before the first step, the first value holds
		for _, st := range v.Steps {
			if st[0] <= t {
				out = st[1]
			}
		}
		return out
	}
	panic(fmt.Sprintf("signalAt: %T is not a number or Steps", s))
}

// signalIntegral is the integral of s (a number or Steps) over [a, b].
func signalIntegral(s Signal, a, b float64) float64 {
	st, ok := s.(Steps)
	if !ok {
		return signalAt(s, a) * (b - a)
	}
	sum, from := 0.0, a
	for _, e := range st.Steps {
		if e[0] > from && e[0] < b {
			sum += signalAt(s, from) * (e[0] - from)
			from = e[0]
		}
	}
	return sum + signalAt(s, from)*(b-from)
}

// signalEdges are the times at which s changes.
func signalEdges(s Signal) []float64 {
	var out []float64
	if st, ok := s.(Steps); ok {
		for _, e := range st.Steps {
			out = append(out, e[0])
		}
	}
	return out
}
