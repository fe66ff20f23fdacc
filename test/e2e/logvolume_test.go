//go:build e2e

package e2e

import (
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-nvml/otelcol-nvml/test/testutil"
)

// `make logvolume` runs the 10-minute version: -logvolume.duration=10m
// -logvolume.flap=30s.
var (
	logVolumeDuration = flag.Duration("logvolume.duration", 20*time.Second, "how long TestLogVolume runs the collector")
	logVolumeFlap     = flag.Duration("logvolume.flap", 4*time.Second, "TestLogVolume's flapping call fails for the second half of every such period")
)

const (
	logVolumeInterval = 200 * time.Millisecond
	// The client logs a flapping call once per this hold-off
	// (nvmlclient call.FlapHoldOff).
	logVolumeHoldOff = 5 * time.Minute
)

// TestLogVolume: one call that always fails and one that flaps write a
// handful of log lines, not one per scrape (issue 16: scraperhelper logged
// every partial scrape error at error level with a stack trace, 89 lines in
// 14 s). What they leave out stays counted, in the receiver's own
// telemetry.
func TestLogVolume(t *testing.T) {
	D, flap := *logVolumeDuration, *logVolumeFlap
	require.Greater(t, flap, 2*logVolumeInterval)
	const (
		always   = "GPU-10900000-0000-4000-8000-000000000000"
		flapping = "GPU-10900000-0000-4000-8000-000000000001"
	)
	// The flapping call fails in the second half of every period, up to
	// well past the run's end.
	var windows []Fault
	for k := 0; time.Duration(k)*flap < D+time.Minute; k++ {
		from := (float64(k) + 0.5) * flap.Seconds()
		windows = append(windows, Fault{Call: "nvmlDeviceGetTemperature", Return: "UNKNOWN", From: from, Until: ptr(from + flap.Seconds()/2)})
	}
	gpu := func(uuid string, errs []Fault) GPU {
		return GPU{
			UUID:         uuid,
			Utilization:  &Utilization{GPU: &Duty{Busy: 0.5}, Memory: &Duty{Busy: 0.2}},
			Memory:       &Memory{TotalBytes: 80 << 30, UsedBytes: float64(10 << 30)},
			TemperatureC: 50,
			PowerW:       200,
			PowerLimitW:  700,
			ClocksMHz:    &Clocks{SM: 1500, Memory: 2600, Graphics: 1500, Video: 1300},
			Processes:    []Process{},
			Events:       []Event{{At: 24 * 3600, XID: 13}}, // watched: no warn line for events not watched
			Errors:       errs,
		}
	}
	scn := Scenario{Comment: "log volume: a call always failing, one flapping", GPUs: []GPU{
		gpu(always, []Fault{{Call: "nvmlDeviceGetPowerUsage", Return: "UNKNOWN"}}), // no until: forever
		gpu(flapping, windows),
	}}
	promAddr := fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
	telemetryAddr := fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
	host, port, _ := strings.Cut(telemetryAddr, ":")
	cfg := fmt.Sprintf(`receivers:
  nvml:
    library_path: %s
    collection_interval: %s
    timeout: %s
exporters:
  prometheus:
    endpoint: %s
    resource_constant_labels:
      included: ["*"]
service:
  pipelines:
    metrics:
      receivers: [nvml]
      exporters: [prometheus]
  telemetry:
    logs:
      sampling:
        enabled: false
    metrics:
      level: normal
      readers:
        - pull:
            exporter:
              prometheus:
                host: %s
                port: %s
`, testutil.AbsFlag(t, "fakenvml", *fakeNVMLPath), logVolumeInterval, 3*logVolumeInterval/4, promAddr, host, port)
	c := &collector{promAddr: promAddr}
	c.proc = startProcess(t, "otelcol-nvml (log volume)", []string{scenarioEnv + "=" + scn.write(t)},
		testutil.AbsFlag(t, "otelcol", *otelcolPath), "--config="+writeFile(t, t.TempDir(), "collector.yaml", cfg))
	t0 := c.scenarioStart(t, 30*time.Second)
	t.Logf("log volume: %s at %s, the temperature of %s failing for %s of every %s", D, logVolumeInterval, flapping, flap/2, flap)
	end := t0.Add(D)
	for time.Now().Before(end) {
		c.proc.requireAlive(t)
		time.Sleep(min(5*time.Second, time.Until(end)))
	}
	time.Sleep(logVolumeInterval)
	c.proc.requireAlive(t)
	self := selfMetrics(t, telemetryAddr)
	data := selfMetrics(t, promAddr)
	assert.NotZero(t, selfSum(data, "hw_temperature_celsius", "hw_id", always), "the metrics go on")
	logs := c.proc.logs.String()

	// Every warn and error line of the run, and the lines written after
	// start-up that are no log entry (a stack trace's lines).
	entry := regexp.MustCompile(`^\d{4}-\d\d-\d\dT[0-9:.]+Z\t(\w+)\t`)
	_, run, ok := strings.Cut(logs, "Everything is ready")
	require.True(t, ok, "the collector's ready line")
	var warns, errs, raw []string
	for _, l := range strings.Split(logs, "\n") {
		switch m := entry.FindStringSubmatch(l); {
		case m == nil:
		case m[1] == "warn":
			warns = append(warns, l)
		case m[1] != "info" && m[1] != "debug":
			errs = append(errs, l)
		}
	}
	for _, l := range strings.Split(strings.TrimSpace(run), "\n")[1:] {
		if !entry.MatchString(l) {
			raw = append(raw, l)
		}
	}
	faults := logCount(logs, "nvmlDeviceGetPowerUsage") + logCount(logs, "nvmlDeviceGetTemperature")
	t.Logf("%d warn lines, %d error lines, %d lines on the faulty calls, %d lines no log entry:\n%s",
		len(warns), len(errs), faults, len(raw), strings.Join(append(warns, errs...), "\n"))

	assert.Empty(t, errs, "no error line (scraperhelper logs every error a scrape returns)")
	assert.Empty(t, raw, "no stack trace")
	assert.Zero(t, logCount(logs, "Error scraping metrics"))
	assert.Equal(t, 1, logCount(logs, "\twarn\t", "NVML call failed", always, "nvmlDeviceGetPowerUsage"),
		"the call that always fails: once")
	// The flapping call: once per hold-off, and its recoveries.
	episodes := int(math.Ceil(D.Seconds() / logVolumeHoldOff.Seconds()))
	flapWarns := logCount(logs, "\twarn\t", "NVML call failed", flapping, "nvmlDeviceGetTemperature")
	assert.GreaterOrEqual(t, flapWarns, 1)
	assert.LessOrEqual(t, flapWarns, episodes, "the flapping call: once per %s", logVolumeHoldOff)
	recovered := logCount(logs, "\tinfo\t", "NVML call recovered", flapping, "nvmlDeviceGetTemperature")
	assert.GreaterOrEqual(t, recovered, flapWarns-1)
	assert.LessOrEqual(t, recovered, flapWarns)
	assert.LessOrEqual(t, len(warns), 1+episodes, "a handful of warn lines")
	assert.LessOrEqual(t, faults, 1+2*episodes, "a handful of lines on the faulty calls")

	// The count stays true: what failed is counted, in the receiver's own
	// telemetry rather than scraperhelper's (which only counts an error it
	// also logs).
	scrapes := D.Seconds() / logVolumeInterval.Seconds()
	power := selfSum(self, "otelcol_receiver_nvml_failed_calls", "call", "nvmlDeviceGetPowerUsage", "hw_id", always)
	temp := selfSum(self, "otelcol_receiver_nvml_failed_calls", "call", "nvmlDeviceGetTemperature", "hw_id", flapping)
	errored := selfSum(self, "otelcol_receiver_nvml_errored_metric_points", "scraper", "nvml")
	t.Logf("self-telemetry: power failed %v times, temperature %v, errored points %v (about %.0f scrapes)", power, temp, errored, scrapes)
	assert.Greater(t, power, scrapes/2, "the power call fails at every scrape")
	assert.Greater(t, temp, scrapes/8, "the temperature call fails in half of them")
	assert.Less(t, temp, power)
	assert.Equal(t, power+temp, errored, "each failed call here leaves out one metric (hw.power, hw.temperature)")
	assert.Zero(t, selfSum(self, "otelcol_scraper_errored_metric_points"), "no partial scrape error returned")
}

type selfSample struct {
	name   string // without a counter's _total suffix
	labels map[string]string
	value  float64
}

// selfMetrics reads the collector's own Prometheus endpoint.
func selfMetrics(t *testing.T, addr string) []selfSample {
	t.Helper()
	client := &http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get("http://" + addr + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var out []selfSample
	for _, l := range strings.Split(string(body), "\n") {
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		i := strings.LastIndexByte(l, ' ')
		v, err := strconv.ParseFloat(l[i+1:], 64)
		if err != nil {
			continue
		}
		name, labels, _ := strings.Cut(l[:i], "{")
		smp := selfSample{name: strings.TrimSuffix(name, "_total"), labels: map[string]string{}, value: v}
		for _, lab := range strings.Split(strings.TrimSuffix(labels, "}"), ",") {
			if k, val, ok := strings.Cut(lab, "="); ok {
				smp.labels[k] = strings.Trim(val, `"`)
			}
		}
		out = append(out, smp)
	}
	return out
}

// selfSum sums the samples of name that carry labels (name=value pairs).
func selfSum(samples []selfSample, name string, labels ...string) float64 {
	sum := 0.0
next:
	for _, s := range samples {
		if s.name != name {
			continue
		}
		for i := 0; i+1 < len(labels); i += 2 {
			if s.labels[labels[i]] != labels[i+1] {
				continue next
			}
		}
		sum += s.value
	}
	return sum
}
