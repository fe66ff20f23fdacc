// Package attribution tells whom a GPU's processes, and the GPU (or MIG
// device) itself, belong to: their container and, on Kubernetes, their pod.
// It does not call NVML: the receiver passes in a device's UUID and the
// PIDs that NVML reports on it, and records the answer of
// Attributor.Attribute.
//
// # Sources
//
// /proc/<pid> gives a process's executable, user and start time
// (internal/procinfo), and its cgroup file gives its container id and, on
// Kubernetes, its pod UID. The cgroup works for every process, including
// those of pods that never requested a GPU but see all of them
// (NVIDIA_VISIBLE_DEVICES=all). Docker, containerd (CRI and plain), CRI-O
// and podman are recognized, on cgroup v1, v2 and hybrid hosts, with the
// cgroupfs and systemd drivers; containerd/cgroups parses the file and only
// the path segments are matched here. So are Slurm's jobs and steps, from
// its cgroup/v2 and cgroup/v1 plugins' trees (slurm.go).
//
// The kubelet's PodResources API gives, for each allocated device id (GPU
// UUID, MIG UUID, time-slicing replica "<UUID>::<n>"), the pod name,
// namespace and container name. It gives no pod UID and knows nothing of
// processes, and cgroups have no names, so the two are joined only on the
// device: when its allocation and its processes each point to one pod, that
// pod is taken to be the same one, and its names are added to the device
// and to the processes of that pod. Otherwise (several pods, or a pod's
// process next to another's) the device gets no owner and each process
// keeps what its cgroup says. A process of a pod that did not request the
// GPU, alone on a GPU whose owner is idle, would take the owner's names:
// nothing in /proc or PodResources tells the two apart. For pods without a
// GPU allocation, the collector's k8sattributes processor adds names from
// the API server, keyed by k8s.pod.uid.
//
// Only the resources named by PodResourcesConfig.ResourcePrefixes count
// (NVIDIA's device plugin's by default). Devices allocated through DRA are
// not read.
//
// # Failure
//
// Nothing here blocks a scrape. The allocation is listed in the background
// (PodResourcesCache), on a short-lived connection bounded by a timeout; on
// an error the last good answer is kept until it is too old (three refreshes
// missed: names are then left off until the kubelet answers), and the error
// is logged once. NVML reports host PIDs: a collector in its own PID
// namespace (no hostPID, the host's /proc not mounted and configured) sees
// none of them, which is logged once, and processes are then reported by
// PID alone. An exited process is left out of its device's owner.
package attribution // import "github.com/otelcol-nvml/otelcol-nvml/internal/attribution"
