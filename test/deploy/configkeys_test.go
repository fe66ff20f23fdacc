package deploy

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Issue 33, part 6: through the real collector, a misspelled receiver key
// and a Prometheus or dcgm-exporter metric name under metrics: fail
// `validate` with the key's path, the receiver's name and the key meant;
// mapstructure's own message named an internal type
// ('nvmlreceiver.plain' has invalid keys) and suggested nothing.
func TestValidateNamesUnknownReceiverKeys(t *testing.T) {
	config := `receivers:
  nvml/gpus:
    colection_interval: 10s
    metrics:
      hw_gpu_utilization_ratio:
        enabled: true
      DCGM_FI_DEV_FB_USED:
        enabled: true
exporters:
  debug:
service:
  pipelines:
    metrics:
      receivers: [nvml/gpus]
      exporters: [debug]
`
	path := filepath.Join(t.TempDir(), "collector.yaml")
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(binFlag(t, "otelcol", *otelcolPath), "validate", "--config="+path).CombinedOutput()
	if err == nil {
		t.Fatalf("validate passed a config with unknown keys:\n%s", out)
	}
	for _, want := range []string{
		`'receivers' error reading configuration for "nvml/gpus"`,
		"nvml receiver: unknown key colection_interval: did you mean collection_interval?",
		"nvml receiver: unknown key metrics::hw_gpu_utilization_ratio: metrics: takes the OpenTelemetry metric names, not the Prometheus ones; did you mean hw.gpu.utilization?",
		"nvml receiver: unknown key metrics::DCGM_FI_DEV_FB_USED: metrics: takes the OpenTelemetry metric names, not the Prometheus ones; did you mean hw.gpu.memory.usage?",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("validate's output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(string(out), "plain") {
		t.Errorf("validate's output names an internal type:\n%s", out)
	}
}
