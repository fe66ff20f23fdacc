package nvmlreceiver

import (
	"errors"
	"fmt"
	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient/sample"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/scraper/scraperhelper"

	"github.com/otelcol-nvml/otelcol-nvml/receiver/nvmlreceiver/internal/metadata"
)

// Config is the nvml receiver's configuration.
type Config struct {
	scraperhelper.ControllerConfig `mapstructure:",squash"`
	metadata.MetricsBuilderConfig  `mapstructure:",squash"`

	// Events switches the log events (XID, ECC) on and off, one by one.
	Events metadata.EventsConfig `mapstructure:"events"`

	// LibraryPath is the path to libnvidia-ml.so.1. Empty means the dynamic
	// loader's own search.
	LibraryPath string `mapstructure:"library_path"`

	// Devices lists the GPUs to watch, each a UUID (GPU-...) or an NVML
	// index, as a YAML integer or a string. Empty means every GPU.
	Devices []string `mapstructure:"devices"`

	// Processes configures the per-process resources.
	Processes ProcessesConfig `mapstructure:"processes"`

	// Kubernetes configures pod attribution through the kubelet.
	Kubernetes KubernetesConfig `mapstructure:"kubernetes"`

	// Slurm configures reading the GPUs' Slurm allocation.
	Slurm SlurmConfig `mapstructure:"slurm"`

	// Accounting configures the held, busy, active and idle time counters
	// (internal/accounting).
	Accounting AccountingConfig `mapstructure:"accounting"`

	// CounterInterval is how often the costly counters are read, in the
	// background: hw.energy (3-7 ms of CPU a call on an H200),
	// nvidia.gpu.clock.event.time and nvidia.gpu.pcie.replays (1.25 ms
	// together). Each point carries the time of its reading, so rates stay
	// exact. 0 reads them at every scrape (still off the scrape's path).
	CounterInterval time.Duration `mapstructure:"counter_interval"`

	// MemoryControllerOnGPM also reads the memory controller's busy window
	// (nvidia.gpu.memory.controller.utilization, 1.4 ms a GPU) on GPUs with GPM, where
	// nvidia.gpu.memory.bandwidth.utilization tells memory activity.
	MemoryControllerOnGPM bool `mapstructure:"memory_controller_on_gpm"`
}

// ProcessesConfig configures the per-process resources.
type ProcessesConfig struct {
	// Enabled turns the per-process metrics and their attribution on.
	Enabled bool `mapstructure:"enabled"`
	// MaxPerGPU caps the processes reported per GPU, largest memory first;
	// the rest are counted in nvidia.gpu.process.dropped. 0 means no cap
	// other than the client's listing limit (sample.MaxProcessesPerGPU,
	// 4096), which is also the highest value accepted.
	MaxPerGPU int `mapstructure:"max_per_gpu"`
	// ProcRoot is where the host's /proc is mounted. NVML reports host PIDs,
	// so a containerized collector needs hostPID or the host /proc here.
	ProcRoot string `mapstructure:"proc_root"`
	// CgroupRoot is where the cgroup file system is mounted (the host's, in
	// a container): container.cpu.time and nvidia.gpu.container.cpu.limit of the
	// containers that hold GPUs are read there.
	CgroupRoot string `mapstructure:"cgroup_root"`
}

// KubernetesConfig configures the kubelet PodResources client.
type KubernetesConfig struct {
	// Enabled turns pod attribution on.
	Enabled bool `mapstructure:"enabled"`
	// PodResourcesSocket is the kubelet's PodResources unix socket.
	PodResourcesSocket string `mapstructure:"pod_resources_socket"`
	// RefreshInterval is how often the allocation is listed, in the
	// background; scrapes only read the cache.
	RefreshInterval time.Duration `mapstructure:"refresh_interval"`
	// ResourcePrefixes selects the extended resources whose device ids are
	// GPUs, by name prefix: NVIDIA's device plugin's by default; other
	// device plugins name theirs otherwise.
	ResourcePrefixes []string `mapstructure:"resource_prefixes"`
	// NodeName is the node the collector runs on, whose ResourceSlices are
	// read (the chart sets it from the downward API's spec.nodeName).
	NodeName string `mapstructure:"node_name"`
	// DRA configures GPUs allocated through Dynamic Resource Allocation
	// claims (the kubelet's dynamic_resources).
	DRA DRAConfig `mapstructure:"dra"`
}

// DRAConfig configures the DRA claims read from the kubelet.
type DRAConfig struct {
	// Drivers selects the claims whose devices are GPUs, by driver name:
	// NVIDIA's DRA driver by default. Empty: no claims are read.
	Drivers []string `mapstructure:"drivers"`
	// ResourceSlices configures reading the node's ResourceSlices, which
	// map a claimed device to its GPU's UUID.
	ResourceSlices ResourceSlicesConfig `mapstructure:"resource_slices"`
}

// ResourceSlicesConfig configures the watch of the node's ResourceSlices.
// Off, or where they cannot be read, a claimed device named gpu-<minor>
// is matched to the GPU of that minor number (the fallback).
type ResourceSlicesConfig struct {
	// Enabled watches them, from the first DRA claim on.
	Enabled bool `mapstructure:"enabled"`
	// Kubeconfig is a kubeconfig file to reach the API server with; empty
	// means in-cluster (the pod's service account).
	Kubeconfig string `mapstructure:"kubeconfig"`
}

// Unmarshal reads the configuration, taking a device index written as a
// YAML integer (devices: [0, 1]) as its string. Unknown keys fail first,
// each named by its path with the key likely meant (config_keys.go).
func (cfg *Config) Unmarshal(conf *confmap.Conf) error {
	if err := unknownKeysError(conf.ToStringMap()); err != nil {
		return err
	}
	if raw, ok := conf.Get("devices").([]any); ok {
		devices := make([]any, len(raw))
		for i, d := range raw {
			switch v := d.(type) {
			case int, int64, uint64:
				devices[i] = fmt.Sprint(v)
			default:
				devices[i] = d
			}
		}
		m := conf.ToStringMap()
		m["devices"] = devices
		conf = confmap.NewFromStringMap(m)
	}
	// The same fields without this method, which would be called again.
	type plain Config
	return conf.Unmarshal((*plain)(cfg))
}

// SlurmConfig configures the Slurm allocation of the node's GPUs.
type SlurmConfig struct {
	// GPUStatDir is the directory where Slurm's prolog writes one file per
	// allocated GPU, named by its index or UUID (a MIG device's UUID for a
	// MIG device), holding "<jobid> <uid>", and its epilog removes it
	// (Princeton jobstats' convention). A GPU so allocated is held by the
	// job, with or without a process. Read once per scrape; absent, nothing
	// is read and nothing logged. Empty turns it off.
	GPUStatDir string `mapstructure:"gpustat_dir"`
}

// DefaultGPUStatDir is where jobstats' prolog writes the allocation.
const DefaultGPUStatDir = "/run/gpustat"

// AccountingConfig configures the GPU-time counters.
type AccountingConfig struct {
	// IdleThreshold is the activity (SM activity with GPM, utilization
	// without) under which a held window counts as idle.
	IdleThreshold float64 `mapstructure:"idle_threshold"`
	// ShareInterval is how often the processes' shares of a GPU's busy
	// time are sampled between scrapes, when the collection interval is
	// longer: NVML keeps only a smoothed recent figure per process, so
	// nvidia.gpu.process.busy.time averages these samples over the window.
	// Each sample is one nvmlDeviceGetProcessUtilization per GPU with a
	// process (about 1.9 ms of CPU on an H200), so the default, 2s, adds
	// about 1 ms of CPU per such GPU per second at a 10 s interval, and
	// nothing at intervals under 4 s. 0 samples only at the scrapes.
	ShareInterval time.Duration `mapstructure:"share_interval"`
}

// minShareInterval bounds the share sampling: each sample is one
// nvmlDeviceGetProcessUtilization call, about 1.9 ms of CPU per GPU.
const minShareInterval = 100 * time.Millisecond

// minCollectionInterval is the shortest collection_interval accepted.
const minCollectionInterval = 100 * time.Millisecond

var uuidPattern = regexp.MustCompile(`^GPU-[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

// migPattern: a MIG device's UUID, as nvidia-smi -L prints it (MIG-<uuid>)
// or as drivers before R470 did (MIG-GPU-<uuid>/<gi>/<ci>).
var migPattern = regexp.MustCompile(`(?i)^MIG-`)

// Validate checks the configuration; every message names its field.
func (cfg *Config) Validate() error {
	var errs []error
	if cfg.CollectionInterval < minCollectionInterval {
		// A bare number is nanoseconds: "collection_interval: 10" would
		// scrape every 10 ns and burn cores.
		errs = append(errs, fmt.Errorf("collection_interval: %v is below the minimum of %v (a bare number is nanoseconds; write a unit, e.g. 10s)",
			cfg.CollectionInterval, minCollectionInterval))
	}
	if cfg.Timeout < 0 {
		errs = append(errs, fmt.Errorf("timeout: %v must not be negative (0 means the collection interval)", cfg.Timeout))
	} else if cfg.Timeout > cfg.CollectionInterval && cfg.CollectionInterval > 0 {
		// A read still running when the next scrape starts makes that GPU
		// skip the next scrape: a longer timeout only widens the gap.
		errs = append(errs, fmt.Errorf("timeout: %v must not exceed collection_interval (%v)", cfg.Timeout, cfg.CollectionInterval))
	}
	if cfg.InitialDelay < 0 {
		errs = append(errs, fmt.Errorf("initial_delay: %v must not be negative", cfg.InitialDelay))
	}
	if cfg.LibraryPath != "" {
		if strings.ContainsRune(cfg.LibraryPath, 0) {
			errs = append(errs, errors.New("library_path: must not contain a NUL byte"))
		} else if !strings.Contains(cfg.LibraryPath, "/") {
			errs = append(errs, fmt.Errorf("library_path: %q is a bare name; give a path, or leave it empty for the loader's search", cfg.LibraryPath))
		} else if fi, err := os.Stat(cfg.LibraryPath); err == nil && fi.IsDir() {
			errs = append(errs, fmt.Errorf("library_path: %q is a directory; give the path of libnvidia-ml.so.1", cfg.LibraryPath))
		}
		// A path that does not exist yet is allowed: the driver may be mounted
		// after the collector starts, and the receiver retries.
	}
	if t := cfg.Accounting.IdleThreshold; !(t > 0 && t < 1) {
		errs = append(errs, fmt.Errorf("accounting::idle_threshold: %v must be above 0 and below 1 (a fraction of SM activity, e.g. 0.05)", t))
	}
	if si := cfg.Accounting.ShareInterval; si != 0 && si < minShareInterval {
		errs = append(errs, fmt.Errorf("accounting::share_interval: %v must be 0 (at the scrapes only) or at least %v (a bare number is nanoseconds)", si, minShareInterval))
	}
	if cfg.CounterInterval < 0 {
		errs = append(errs, errors.New("counter_interval: must be 0 (every scrape) or more"))
	}
	if cfg.Processes.MaxPerGPU < 0 || cfg.Processes.MaxPerGPU > sample.MaxProcessesPerGPU {
		errs = append(errs, fmt.Errorf("processes::max_per_gpu: %d must be between 0 (no cap but NVML's listing limit) and %d",
			cfg.Processes.MaxPerGPU, sample.MaxProcessesPerGPU))
	}
	if cfg.Processes.Enabled && !filepath.IsAbs(cfg.Processes.ProcRoot) {
		errs = append(errs, fmt.Errorf("processes::proc_root: %q must be an absolute path", cfg.Processes.ProcRoot))
	}
	if cfg.Processes.Enabled && !filepath.IsAbs(cfg.Processes.CgroupRoot) {
		errs = append(errs, fmt.Errorf("processes::cgroup_root: %q must be an absolute path", cfg.Processes.CgroupRoot))
	}
	if d := cfg.Slurm.GPUStatDir; d != "" {
		if strings.ContainsRune(d, 0) {
			errs = append(errs, errors.New("slurm::gpustat_dir: must not contain a NUL byte"))
		} else if !filepath.IsAbs(d) {
			errs = append(errs, fmt.Errorf("slurm::gpustat_dir: %q must be an absolute path (or empty to read no Slurm allocation)", d))
		} else if fi, err := os.Stat(d); err == nil && !fi.IsDir() {
			errs = append(errs, fmt.Errorf("slurm::gpustat_dir: %q is not a directory", d))
		}
		// A directory that does not exist yet is allowed: the prolog makes
		// it at the first job.
	}
	if cfg.Kubernetes.Enabled {
		if !cfg.Processes.Enabled {
			// Owners are found through the GPUs' processes: with processes
			// off nothing would be attributed, and the kubelet polled for
			// nothing.
			errs = append(errs, errors.New("kubernetes::enabled: true needs processes::enabled: true (pods are found through the GPU processes); enable processes or disable kubernetes"))
		}
		if !filepath.IsAbs(cfg.Kubernetes.PodResourcesSocket) {
			errs = append(errs, fmt.Errorf("kubernetes::pod_resources_socket: %q must be an absolute path", cfg.Kubernetes.PodResourcesSocket))
		}
		if cfg.Kubernetes.RefreshInterval < time.Second {
			errs = append(errs, errors.New("kubernetes::refresh_interval: must be at least 1s"))
		}
		if len(cfg.Kubernetes.ResourcePrefixes) == 0 {
			errs = append(errs, errors.New("kubernetes::resource_prefixes: must name at least one resource"))
		}
		for i, p := range cfg.Kubernetes.ResourcePrefixes {
			if p == "" {
				errs = append(errs, fmt.Errorf("kubernetes::resource_prefixes[%d]: must not be empty", i))
			}
		}
		for i, d := range cfg.Kubernetes.DRA.Drivers {
			if d == "" {
				errs = append(errs, fmt.Errorf("kubernetes::dra::drivers[%d]: must not be empty", i))
			}
		}
		if k := cfg.Kubernetes.DRA.ResourceSlices.Kubeconfig; k != "" && !filepath.IsAbs(k) {
			errs = append(errs, fmt.Errorf("kubernetes::dra::resource_slices::kubeconfig: %q must be an absolute path", k))
		}
	}
	// hw.id and process.pid tell the series apart: without hw.id every GPU,
	// without process.pid every process of one executable in one container,
	// would give one series, and their counters, each with its own start
	// time, one stream.
	if ra := cfg.ResourceAttributes; !ra.HwID.Enabled {
		errs = append(errs, errors.New("resource_attributes::hw.id::enabled: false is not allowed: hw.id (the GPU's UUID) tells each GPU's series apart"))
	} else if !ra.ProcessPid.Enabled && cfg.Processes.Enabled {
		errs = append(errs, errors.New("resource_attributes::process.pid::enabled: false is not allowed while processes::enabled is true: process.pid tells apart the series of processes of one executable in one container"))
	}
	seen := map[string]bool{}
	for i, d := range cfg.Devices {
		field := fmt.Sprintf("devices[%d]", i)
		switch {
		case d == "":
			errs = append(errs, fmt.Errorf("%s: must not be empty", field))
		case isIndex(d):
		case uuidPattern.MatchString(d):
		case migPattern.MatchString(d):
			errs = append(errs, fmt.Errorf("%s: %q is a MIG device: devices lists whole GPUs (UUID or index); a GPU's MIG devices are read with it, so list its parent GPU", field, d))
		default:
			errs = append(errs, fmt.Errorf("%s: %q is neither a GPU UUID (GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx) nor an index", field, d))
		}
		if seen[strings.ToLower(d)] {
			errs = append(errs, fmt.Errorf("%s: %q is listed twice", field, d))
		}
		seen[strings.ToLower(d)] = true
	}
	return errors.Join(errs...)
}

func isIndex(s string) bool {
	n, err := strconv.Atoi(s)
	return err == nil && n >= 0 && strconv.Itoa(n) == s
}
