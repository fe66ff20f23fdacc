// Package attribution tells whom a GPU process, or a whole GPU, belongs to:
// its container, and on Kubernetes its pod. It does not call NVML: the
// receiver passes in the PIDs and device ids that NVML reports.
//
// # Two sources
//
// The cgroup of a process (/proc/<pid>/cgroup) gives its container id and,
// on Kubernetes, its pod UID; see ResolveProcess, ParseCgroup and
// ParseCgroupPath. It works for every process, including those of pods that
// never requested a GPU but see all of them (NVIDIA_VISIBLE_DEVICES=all).
// Docker, containerd (CRI and plain), CRI-O and podman are recognized, on
// cgroup v1, v2 and hybrid hosts, with the cgroupfs and systemd drivers.
// The file is parsed by containerd/cgroups; only the path segments are
// matched here.
//
// The kubelet's PodResources API (k8s.io/kubelet podresources v1, gRPC on
// a unix socket) gives, for each allocated device id (GPU UUID, MIG UUID,
// time-slicing replica "<UUID>::<n>"), the pod name, namespace and
// container name it is allocated to; see PodResourcesCache. It gives no pod
// UID, and knows nothing of processes.
//
// Neither source can name the other's keys: List has no pod UIDs, and
// cgroups have no names. The package does not guess a join between them;
// GPUOwner merges the two only on the GPU resource, where both describe
// the same device.
//
// # API
//
//	type Owner struct{ ContainerID, PodUID, PodName, Namespace, ContainerName string }
//	func (Owner) IsZero() bool
//	func (Owner) Attributes() map[string]string // keyed by AttributeContainerID etc.
//
//	func ParseCgroupPath(path string) Owner
//	func ParseCgroup(r io.Reader) (Owner, error)
//	func ResolveProcess(procRoot string, pid int) (Owner, error)
//	func NewResolver(procRoot string, logger *zap.Logger) *Resolver
//	func (*Resolver) ProcRoot() string
//	func (*Resolver) Check() error
//	func (*Resolver) Resolve(pid int) (Owner, error)
//	var ErrProcessNotFound, ErrPIDNamespace error
//
//	const DefaultPodResourcesSocket
//	var DefaultResourcePrefixes []string
//	type PodResourcesConfig struct{ Socket; RefreshInterval, Timeout; ResourcePrefixes }
//	func DefaultPodResourcesConfig() PodResourcesConfig
//	func (PodResourcesConfig) Validate() error
//	func NewPodResourcesCache(cfg PodResourcesConfig, logger *zap.Logger) *PodResourcesCache
//	func (*PodResourcesCache) Start(ctx context.Context) error
//	func (*PodResourcesCache) Shutdown(ctx context.Context) error
//	func (*PodResourcesCache) Owners(deviceIDs ...string) []Owner
//	func (*PodResourcesCache) Lookup(deviceID string) (Owner, bool)
//	func (*PodResourcesCache) Synced() (time.Time, bool)
//
//	func SingleOwner(owners []Owner) (Owner, bool)
//	func GPUOwner(allocated, processes []Owner) (Owner, bool)
//
// Owner's fields are five strings in a fixed order: a struct of the
// receiver's with the same fields converts to and from it directly.
//
// # Wiring it into the receiver
//
// At start:
//
//	res := attribution.NewResolver(cfg.Processes.ProcRoot, logger)
//	_ = res.Check() // logs the PID-namespace problem once; Resolve returns it
//	pods := attribution.NewPodResourcesCache(attribution.PodResourcesConfig{
//		Socket:          cfg.Kubernetes.PodResourcesSocket,
//		RefreshInterval: cfg.Kubernetes.RefreshInterval,
//	}, logger)
//	err := pods.Start(ctx) // returns at once; Shutdown(ctx) at shutdown
//
// At each scrape, per GPU (nothing here blocks or dials):
//
//	var procOwners []attribution.Owner
//	for _, p := range gpuProcesses {
//		o, err := res.Resolve(int(p.PID))
//		if err != nil {
//			continue // exited, or ErrPIDNamespace: no container attributes
//		}
//		procOwners = append(procOwners, o) // a host process is a zero Owner
//		// the process's resource: o.ContainerID, o.PodUID
//	}
//	alloc := pods.Owners(append([]string{gpuUUID}, migUUIDs...)...)
//	if o, ok := attribution.GPUOwner(alloc, procOwners); ok {
//		// the GPU's resource: o.Attributes()
//	}
//
// A MIG device's own resource, if the receiver emits one, takes
// pods.Lookup(migUUID).
//
// Process resources carry container.id and k8s.pod.uid from the cgroup.
// Pod and container names for them come from PodResources only through the
// GPU (GPUOwner, when one pod holds the GPU); for a pod that never
// requested a GPU, pod name and namespace need the API server: the
// collector's k8sattributes processor associates on k8s.pod.uid (and
// container.id) and adds them.
//
// # PID namespaces
//
// NVML reports host PIDs. A collector in a container sees them only with
// hostPID, or with the host's /proc mounted (say at /host/proc) and the
// proc root set to it. Resolver.Check finds the case where the proc root
// shows only the collector's own, non-initial PID namespace; it then logs
// one warning and Resolve returns ErrPIDNamespace for every PID, so that
// metrics go on without container attributes. A node that is itself a
// container (kind) is such a namespace too, and attribution is off there.
// Reading /proc/<pid>/cgroup needs no privilege. With the collector in a
// cgroup namespace of its own, other processes' paths start with "/..";
// the segments are matched anyway.
//
// # PodResources
//
// The cache lists on its own goroutine every RefreshInterval, each time on
// a short-lived connection, bounded by Timeout: a kubelet restart needs no
// reconnection, and no scrape ever dials. Owners and Lookup read an
// immutable snapshot through an atomic pointer. On an error the last good
// allocation is kept and the error is logged once (again only when it
// changes, and once on recovery). Only resources named by
// ResourcePrefixes count: nvidia.com/gpu, nvidia.com/gpu.shared and
// nvidia.com/mig-* by default. A replica "<UUID>::<n>" is indexed under
// itself and under <UUID>. Devices allocated through DRA
// (dynamic_resources) are not read.
package attribution // import "github.com/otelcol-nvml/otelcol-nvml/internal/attribution"
