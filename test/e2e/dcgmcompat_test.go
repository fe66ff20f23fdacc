//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/otelcol-nvml/otelcol-nvml/test/testutil"
)

// TestDCGMCompat loads deploy/prometheus/dcgm-compat.yaml into a real
// Prometheus that scrapes otelcol-nvml on two simulated GPUs (GPU 0 is the
// pipeline scenario's, with every health figure, GPM and Xids 13 and 31; GPU
// 1 the same without Xids), and requires every rule to record a series for
// each GPU with dcgm-exporter's labels only, and a few values in
// dcgm-exporter's units.
func TestDCGMCompat(t *testing.T) {
	t.Parallel()
	rulesPath, err := filepath.Abs(filepath.Join("..", "..", "deploy", "prometheus", "dcgm-compat.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(rulesPath)
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Groups []struct {
			Rules []struct {
				Record string `yaml:"record"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(data, &file); err != nil {
		t.Fatal(err)
	}
	var records []string
	for _, g := range file.Groups {
		for _, r := range g.Rules {
			records = append(records, r.Record)
		}
	}
	if len(records) < 30 {
		t.Fatalf("only %d rules in dcgm-compat.yaml", len(records))
	}

	gpu0 := pipelineGPUs[0]
	gpu1 := gpu0
	gpu1.uuid, gpu1.serial, gpu1.pci = "GPU-e2e00000-0000-4000-8000-0000000000d1", "SIMULATED-E2E-D1", "00000000:2A:00.0"
	gpu1.events = nil
	gpus := []gpuSpec{gpu0, gpu1}
	s := Scenario{Comment: "e2e: dcgm-exporter's names", DriverVersion: driverVersion, Sampling: &Sampling{Hz: 6, Buffer: 120}}
	for _, g := range gpus {
		sg := g.scenarioGPU()
		sg.Utilization.Decoder = &Duty{Busy: 0.25, PeriodS: 1.0 / 3}
		s.GPUs = append(s.GPUs, sg)
	}

	promAddr := fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
	cfg := fmt.Sprintf(`receivers:
  nvml:
    library_path: %s
%s
processors:
  resource:
    attributes:
      - {key: k8s.node.name, value: dcgm-node, action: insert}
      - {key: host.name, value: dcgm-host, action: insert}
      - {key: k8s.pod.name, value: trainer-0, action: insert}
      - {key: k8s.namespace.name, value: ml, action: insert}
      - {key: k8s.container.name, value: main, action: insert}
exporters:
  prometheus:
    endpoint: %s
    resource_constant_labels:
      included: ["*"]
service:
  pipelines:
    metrics:
      receivers: [nvml]
      processors: [resource]
      exporters: [prometheus]
  telemetry:
    metrics:
      level: none
`, testutil.AbsFlag(t, "fakenvml", *fakeNVMLPath),
		indent(receiverSettings+"metrics:\n  nvidia.gpu.tensor.pipe.activity:\n    enabled: true\n", "    "), promAddr)
	col := startProcess(t, "otelcol-nvml", []string{scenarioEnv + "=" + s.write(t)},
		testutil.AbsFlag(t, "otelcol", *otelcolPath), "--config="+writeFile(t, t.TempDir(), "collector.yaml", cfg))
	prom := startPrometheus(t, promAddr, rulesPath)

	// Every rule with a series per GPU (the 1m rates need two scrapes), and
	// GPU 0's last Xid (31, at t = 6) counted.
	missing := func() []string {
		var out []string
		if len(prom.tryQuery(`DCGM_FI_DEV_XID_ERRORS{gpu="0", err_code="31"}`)) == 0 {
			out = append(out, "Xid 31 on GPU 0")
		}
		for _, r := range records {
			gpusSeen := map[string]bool{}
			for _, s := range prom.tryQuery(r) {
				gpusSeen[s.Metric["gpu"]] = true
			}
			if len(gpusSeen) < len(gpus) {
				out = append(out, fmt.Sprintf("%s (GPUs %v)", r, gpusSeen))
			}
		}
		return out
	}
	var left []string
	deadline := time.Now().Add(30 * time.Second)
	for left = missing(); len(left) > 0 && time.Now().Before(deadline); left = missing() {
		col.requireAlive(t)
		time.Sleep(time.Second)
	}
	if len(left) > 0 {
		t.Fatalf("recorded series without data for every GPU after 30 s: %v", left)
	}

	t.Run("dcgm-exporter's labels", func(t *testing.T) {
		allowed := map[string]bool{"__name__": true, "job": true, "instance": true, "gpu": true, "UUID": true, "pci_bus_id": true,
			"device": true, "modelName": true, "Hostname": true, "DCGM_FI_DRIVER_VERSION": true, "pod": true, "namespace": true, "container": true}
		for _, r := range records {
			for _, s := range prom.query(t, r) {
				m := s.Metric
				i, err := strconv.Atoi(m["gpu"])
				if err != nil || i < 0 || i >= len(gpus) {
					t.Errorf("%s: gpu %q is not a GPU index: %v", r, m["gpu"], m)
					continue
				}
				g := gpus[i]
				want := map[string]string{"__name__": r, "job": "otelcol-nvml", "instance": promAddr, "UUID": g.uuid, "pci_bus_id": g.pci,
					"device": fmt.Sprintf("nvidia%d", i), "modelName": g.name, "Hostname": "dcgm-node", "DCGM_FI_DRIVER_VERSION": driverVersion,
					"pod": "trainer-0", "namespace": "ml", "container": "main"}
				for k, v := range want {
					if m[k] != v {
						t.Errorf("%s on GPU %d: %s = %q, want %q", r, i, k, m[k], v)
					}
				}
				for k := range m {
					if !allowed[k] && (r != "DCGM_FI_DEV_XID_ERRORS" || k != "err_code") {
						t.Errorf("%s on GPU %d: label %s, which dcgm-exporter has not", r, i, k)
					}
				}
			}
		}
	})

	t.Run("values in dcgm-exporter's units", func(t *testing.T) {
		for _, c := range []struct {
			record string
			want   float64
			tol    float64
		}{
			{"DCGM_FI_DEV_SM_CLOCK", gpu0.clocks["sm"], 0},
			{"DCGM_FI_DEV_MEM_CLOCK", gpu0.clocks["memory"], 0},
			{"DCGM_FI_DEV_GPU_TEMP", gpu0.temp, 0},
			{"DCGM_FI_DEV_MEMORY_TEMP", gpu0.memTemp, 0},
			{"DCGM_FI_DEV_POWER_USAGE", gpu0.power, 0},
			{"DCGM_FI_DEV_FB_USED", float64(gpu0.used) / (1 << 20), 0},
			{"DCGM_FI_DEV_FB_FREE", float64(gpu0.total-gpu0.used-gpu0.reserved) / (1 << 20), 0},
			{"DCGM_FI_DEV_GPU_UTIL", 100 * gpu0.general, 10},
			// GPM's DRAM bandwidth: a GPU with GPM has no memory controller window.
			{"DCGM_FI_DEV_MEM_COPY_UTIL", 20, 1e-9},
			{"DCGM_FI_DEV_ENC_UTIL", 100 * gpu0.encoder, 10},
			{"DCGM_FI_DEV_DEC_UTIL", 25, 10},
			{"DCGM_FI_PROF_SM_ACTIVE", 0.40, 1e-9},
			{"DCGM_FI_PROF_GR_ENGINE_ACTIVE", 0.45, 1e-9},
			{"DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", 0.30, 1e-9},
			{"DCGM_FI_PROF_DRAM_ACTIVE", 0.20, 1e-9},
		} {
			res := prom.query(t, c.record+`{gpu="0"}`)
			if len(res) != 1 {
				t.Errorf("%s: %d series on GPU 0", c.record, len(res))
				continue
			}
			if got := res[0].value(t); math.Abs(got-c.want) > c.tol {
				t.Errorf("%s = %v, want %v (±%v)", c.record, got, c.want, c.tol)
			}
		}
		// The rates over 1m (a minute of history is longer than the test)
		// and the energy (which rises 250 J/s): each compared with our
		// figure at the time the rule was evaluated, over the same samples.
		for _, c := range []struct {
			record, ours string
			div          float64 // our unit in theirs
		}{
			{"DCGM_FI_PROF_PCIE_TX_BYTES", `rate(hw_gpu_io_bytes_total{network_io_direction="transmit",nvidia_gpu_index="0"}[1m])`, 1},
			{"DCGM_FI_PROF_PCIE_RX_BYTES", `rate(hw_gpu_io_bytes_total{network_io_direction="receive",nvidia_gpu_index="0"}[1m])`, 1},
			{"DCGM_FI_DEV_PCIE_TX_THROUGHPUT", `rate(hw_gpu_io_bytes_total{network_io_direction="transmit",nvidia_gpu_index="0"}[1m])`, 1024},
			{"DCGM_FI_DEV_PCIE_RX_THROUGHPUT", `rate(hw_gpu_io_bytes_total{network_io_direction="receive",nvidia_gpu_index="0"}[1m])`, 1024},
			{"DCGM_FI_PROF_NVLINK_TX_BYTES", `rate(nvidia_gpu_nvlink_io_bytes_total{network_io_direction="transmit",nvidia_gpu_index="0"}[1m])`, 1},
			{"DCGM_FI_PROF_NVLINK_RX_BYTES", `rate(nvidia_gpu_nvlink_io_bytes_total{network_io_direction="receive",nvidia_gpu_index="0"}[1m])`, 1},
			{"DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", `hw_energy_joules_total{nvidia_gpu_index="0"}`, 1e-3},
		} {
			ts := prom.query(t, `timestamp(`+c.record+`{gpu="0"})`)
			if len(ts) != 1 {
				t.Errorf("%s: %d series on GPU 0", c.record, len(ts))
				continue
			}
			at := strconv.FormatFloat(ts[0].value(t), 'f', 3, 64)
			q := fmt.Sprintf(`%s{gpu="0"} / on () (max(%s) / %g)`, c.record, c.ours, c.div)
			res, err := prom.queryAt(q, at)
			if err != nil || len(res) != 1 {
				t.Errorf("%s at %s: %v %v", q, at, res, err)
				continue
			}
			if got := res[0].value(t); math.Abs(got-1) > 0.02 {
				t.Errorf("%s is %v times ours in its unit, want 1", c.record, got)
			}
		}
	})

	t.Run("Xid errors: per code on GPU 0, 0 on GPU 1", func(t *testing.T) {
		codes := map[string]float64{}
		for _, s := range prom.query(t, `DCGM_FI_DEV_XID_ERRORS{gpu="0"}`) {
			codes[s.Metric["err_code"]] = s.value(t)
		}
		if codes["13"] != 2 || codes["31"] != 1 || len(codes) != 2 {
			t.Errorf("GPU 0: Xid counts by err_code %v, want 13: 2, 31: 1", codes)
		}
		res := prom.query(t, `DCGM_FI_DEV_XID_ERRORS{gpu="1"}`)
		if len(res) != 1 || res[0].Metric["err_code"] != "" || res[0].value(t) != 0 {
			t.Errorf("GPU 1: %v, want one series of 0 without err_code", res)
		}
	})
	sort.Strings(records)
	t.Logf("%d dcgm-exporter fields with data and labels: %v", len(records), records)
}

// queryAt runs an instant query at a time (Unix seconds).
func (p *prometheus) queryAt(q, at string) ([]promSeries, error) {
	data, err := p.get("/api/v1/query", url.Values{"query": {q}, "time": {at}})
	if err != nil {
		return nil, err
	}
	var d struct {
		Result []promSeries `json:"result"`
	}
	return d.Result, json.Unmarshal(data, &d)
}
