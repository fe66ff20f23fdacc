package nvmlreceiver

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"

	"github.com/otelcol-nvml/otelcol-nvml/internal/attribution"
	"github.com/otelcol-nvml/otelcol-nvml/receiver/nvmlreceiver/internal/accounting"
	"github.com/otelcol-nvml/otelcol-nvml/receiver/nvmlreceiver/internal/metadata"
)

func loadConfig(t *testing.T, name string) (*Config, error) {
	t.Helper()
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)
	cfg := NewFactory().CreateDefaultConfig().(*Config)
	sub, err := cm.Sub(component.NewIDWithName(metadata.Type, name).String())
	require.NoError(t, err)
	require.NoError(t, sub.Unmarshal(cfg))
	return cfg, confmap.Validate(cfg)
}

func TestDefaultConfig(t *testing.T) {
	t.Parallel()
	cfg, err := loadConfig(t, "")
	require.NoError(t, err)
	assert.Equal(t, 10*time.Second, cfg.CollectionInterval)
	assert.Empty(t, cfg.LibraryPath)
	assert.Empty(t, cfg.Devices)
	assert.True(t, cfg.Metrics.HwGpuUtilization.Enabled)
	assert.True(t, cfg.Events.NvidiaGpuXid.Enabled)
	assert.True(t, cfg.Events.NvidiaGpuEccDoubleBit.Enabled)
	assert.True(t, cfg.Events.NvidiaGpuEccSingleBit.Enabled)
	assert.Equal(t, attribution.DefaultPodResourcesSocket, cfg.Kubernetes.PodResourcesSocket)
	assert.Equal(t, attribution.DefaultResourcePrefixes(), cfg.Kubernetes.ResourcePrefixes)
	assert.Equal(t, []string{"gpu.nvidia.com"}, cfg.Kubernetes.DRA.Drivers)
	assert.True(t, cfg.Kubernetes.DRA.ResourceSlices.Enabled)
	assert.Empty(t, cfg.Kubernetes.DRA.ResourceSlices.Kubeconfig, "in-cluster")
}

func TestCustomConfig(t *testing.T) {
	t.Parallel()
	cfg, err := loadConfig(t, "custom")
	require.NoError(t, err)
	assert.Equal(t, 30*time.Second, cfg.CollectionInterval)
	assert.Equal(t, 2*time.Second, cfg.InitialDelay)
	assert.Equal(t, 5*time.Second, cfg.Timeout)
	assert.Equal(t, "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1", cfg.LibraryPath)
	assert.Equal(t, []string{"0", "GPU-5b1a1a9e-0c1f-4d3e-9a43-6c1b2b7f9d10"}, cfg.Devices)
	assert.False(t, cfg.Metrics.NvidiaGpuClockFrequency.Enabled)
	assert.False(t, cfg.ResourceAttributes.HwSerialNumber.Enabled)
	assert.False(t, cfg.Events.NvidiaGpuEccSingleBit.Enabled)
	assert.True(t, cfg.Events.NvidiaGpuXid.Enabled, "the other events keep their default")
	assert.Equal(t, []string{"nvidia.com/gpu", "example.com/accelerator"}, cfg.Kubernetes.ResourcePrefixes)
}

func TestInvalidConfigNamesTheField(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		want []string
	}{
		{"bad_interval", []string{"collection_interval"}},
		{"bad_devices", []string{
			"devices[0]: must not be empty",
			`devices[1]: "gpu-1" is neither a GPU UUID`,
			`devices[3]: "3" is listed twice`,
		}},
		{"bad_library", []string{`library_path: "libnvidia-ml.so.1" is a bare name`}},
		{"bad_resource_prefixes", []string{"kubernetes::resource_prefixes[1]: must not be empty"}},
		{"bad_dra", []string{"kubernetes::dra::drivers[1]: must not be empty",
			`kubernetes::dra::resource_slices::kubeconfig: "kubeconfig.yaml" must be an absolute path`}},
		{"bad_cgroup_root", []string{`processes::cgroup_root: "sys/fs/cgroup" must be an absolute path`}},
		// Defect 6 of issue 9: each of these passed validation.
		{"bare_number_interval", []string{"collection_interval: 10ns is below the minimum of 100ms"}},
		{"timeout_above_interval", []string{"timeout: 10s must not exceed collection_interval (1s)"}},
		{"negative_initial_delay", []string{"initial_delay: -1s must not be negative"}},
		{"max_per_gpu_too_large", []string{"processes::max_per_gpu: 100000 must be between 0"}},
		// Review 2, finding 6: accepted, though it could never attribute
		// anything, while the kubelet was still polled.
		{"kubernetes_without_processes", []string{"kubernetes::enabled: true needs processes::enabled: true"}},
		{"negative_device", []string{`devices[0]: "-1" is neither a GPU UUID`}},
		// Issue 26: a MIG UUID got the generic message.
		{"mig_device", []string{
			`devices[0]: "MIG-4f3b1c2a-7e6d-5c4b-9a8f-0e1d2c3b4a59" is a MIG device: devices lists whole GPUs`,
			`devices[1]: "MIG-GPU-5b1a1a9e-0c1f-4d3e-9a43-6c1b2b7f9d10/1/0" is a MIG device`,
		}},
		{"bad_idle_threshold", []string{"accounting::idle_threshold: 5 must be above 0 and below 1"}},
		{"bad_share_interval", []string{"accounting::share_interval: 10ns must be 0 (at the scrapes only) or at least 100ms"}},
		// Issue 23: without them two processes of one executable in one
		// container, or two GPUs, gave one series, and their counters'
		// start times (stampStarts) could not be told apart.
		{"process_pid_off", []string{"resource_attributes::process.pid::enabled: false"}},
		{"hw_id_off", []string{"resource_attributes::hw.id::enabled: false"}},
		{"bad_gpustat_dir", []string{`slurm::gpustat_dir: "run/gpustat" must be an absolute path`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := loadConfig(t, tt.name)
			require.Error(t, err)
			for _, w := range tt.want {
				assert.ErrorContains(t, err, w)
			}
		})
	}
}

// Issue 16: `devices: [0, 1]` was refused ("expected type 'string', got
// unconvertible type 'int'"), though indices are allowed.
func TestDevicesAsYAMLIntegers(t *testing.T) {
	t.Parallel()
	cfg, err := loadConfig(t, "integer_devices")
	require.NoError(t, err)
	assert.Equal(t, []string{"0", "1", "2", "GPU-5b1a1a9e-0c1f-4d3e-9a43-6c1b2b7f9d10"}, cfg.Devices)
}

func TestAccountingConfig(t *testing.T) {
	t.Parallel()
	cfg, err := loadConfig(t, "")
	require.NoError(t, err)
	assert.Equal(t, accounting.DefaultIdleThreshold, cfg.Accounting.IdleThreshold)
	assert.Equal(t, 2*time.Second, cfg.shareSampling(), "the default 10 s interval holds 5 share samples")
	cfg, err = loadConfig(t, "accounting")
	require.NoError(t, err)
	assert.Equal(t, 0.1, cfg.Accounting.IdleThreshold)
	assert.Equal(t, 500*time.Millisecond, cfg.shareSampling(), "a 10 s interval holds 20 share samples")
	cfg.CollectionInterval = 900 * time.Millisecond
	assert.Zero(t, cfg.shareSampling(), "the scrape's own sample suffices")
	cfg.CollectionInterval = 10 * time.Second
	cfg.Metrics.NvidiaGpuProcessBusyTime.Enabled = false
	assert.Zero(t, cfg.shareSampling(), "nothing uses the shares")
}

func TestSlurmConfig(t *testing.T) {
	t.Parallel()
	cfg, err := loadConfig(t, "")
	require.NoError(t, err)
	assert.Equal(t, "/run/gpustat", cfg.Slurm.GPUStatDir, "jobstats' directory by default")
	cfg, err = loadConfig(t, "slurm")
	require.NoError(t, err)
	assert.Equal(t, "/var/run/gpustat", cfg.Slurm.GPUStatDir)
	cfg, err = loadConfig(t, "slurm_off")
	require.NoError(t, err)
	assert.Empty(t, cfg.Slurm.GPUStatDir, "empty turns it off")

	cfg = createDefaultConfig().(*Config)
	cfg.Slurm.GPUStatDir = filepath.Join(t.TempDir(), "not-yet")
	assert.NoError(t, cfg.Validate(), "the prolog makes it at the first job")
	file := filepath.Join(t.TempDir(), "gpustat")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	cfg.Slurm.GPUStatDir = file
	assert.ErrorContains(t, cfg.Validate(), "slurm::gpustat_dir: \""+file+"\" is not a directory")
	cfg.Slurm.GPUStatDir = "/run/gpu\x00stat"
	assert.ErrorContains(t, cfg.Validate(), "slurm::gpustat_dir: must not contain a NUL byte")
}

func TestLibraryPathDirectoryIsRejected(t *testing.T) {
	t.Parallel()
	cfg := createDefaultConfig().(*Config)
	cfg.LibraryPath = t.TempDir()
	assert.ErrorContains(t, cfg.Validate(), "library_path")
	cfg.LibraryPath = filepath.Join(t.TempDir(), "not-yet-mounted", "libnvidia-ml.so.1")
	assert.NoError(t, cfg.Validate(), "a library that appears later is allowed")
}
