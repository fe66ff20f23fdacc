//go:build cgo

package nvmlreceiver

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/otelcol-nvml/otelcol-nvml/test/nvmltest"
)

// The container and pod of process 4242 in testdata/proc.
const (
	testContainerID = "1f2e3d4c5b6a79881f2e3d4c5b6a79881f2e3d4c5b6a79881f2e3d4c5b6a7988"
	testPodUID      = "0d3e0c8a-1111-4222-8333-944455556666"
)

// hungSocket accepts connections on a unix socket and never answers, like a
// wedged kubelet.
func hungSocket(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubelet.sock")
	ln, err := net.Listen("unix", path)
	require.NoError(t, err)
	var mu sync.Mutex
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return path
}

func TestSlowKubeletNeverDelaysGPUMetrics(t *testing.T) {
	t.Parallel()
	socket := hungSocket(t)
	m := nvmltest.NewH200()
	m.GPUs[0].SetProcesses(proc(4242, 1))
	ts := newTestScraper(t, m, func(cfg *Config) {
		cfg.Kubernetes.Enabled = true
		cfg.Kubernetes.PodResourcesSocket = socket
		cfg.Kubernetes.RefreshInterval = time.Second
	})
	ts.start(t)
	for range 3 {
		start := time.Now()
		md := ts.scrapeOK(t)
		assert.Less(t, time.Since(start), 500*time.Millisecond)
		assert.Len(t, resourceIDs(md), 8)
		// The cgroup still attributes the process while the kubelet hangs.
		assert.Equal(t, testPodUID, processResources(md, nvmltest.UUID(0))[4242]["k8s.pod.uid"])
	}
}

// Without the kubelet's socket, attribution falls back to the cgroups: the
// process and its GPU keep their container and pod UID, get no pod names,
// and the missing socket is said once.
func TestMissingKubeletSocket(t *testing.T) {
	t.Parallel()
	socket := filepath.Join(t.TempDir(), "absent.sock")
	m := nvmltest.NewH200()
	m.GPUs[0].SetProcesses(proc(4242, 1))
	ts := newTestScraper(t, m, func(cfg *Config) {
		cfg.Kubernetes.Enabled = true
		cfg.Kubernetes.PodResourcesSocket = socket
		cfg.Kubernetes.RefreshInterval = time.Second
	})
	ts.start(t)
	const cannotList = "Cannot list the kubelet's PodResources"
	require.Eventually(t, func() bool { return ts.logs.FilterMessageSnippet(cannotList).Len() > 0 }, 5*time.Second, 5*time.Millisecond)

	for range 2 {
		md := ts.scrapeOK(t)
		assert.Len(t, resourceIDs(md), 8)
		gpu := gpuResourceAttrs(md, nvmltest.UUID(0))
		assert.Equal(t, testPodUID, gpu["k8s.pod.uid"], "the GPU's owner from its process's cgroup")
		assert.Equal(t, testContainerID, gpu["container.id"])
		assert.NotContains(t, gpu, "k8s.pod.name")
		process := processResources(md, nvmltest.UUID(0))[4242]
		assert.Equal(t, testContainerID, process["container.id"])
		assert.Equal(t, testPodUID, process["k8s.pod.uid"])
		assert.NotContains(t, process, "k8s.pod.name")
		assert.NotContains(t, process, "k8s.namespace.name")
	}
	warns := ts.logs.FilterMessageSnippet(cannotList).All()
	require.Len(t, warns, 1, "said once")
	assert.Equal(t, socket, warns[0].ContextMap()["socket"])
	assert.Contains(t, warns[0].ContextMap()["error"], "no such file or directory")
}

// kubeletAnswer serves one fixed PodResources answer.
type kubeletAnswer struct {
	podresourcesv1.UnimplementedPodResourcesListerServer
	resp *podresourcesv1.ListPodResourcesResponse
}

func (k *kubeletAnswer) List(context.Context, *podresourcesv1.ListPodResourcesRequest) (*podresourcesv1.ListPodResourcesResponse, error) {
	return k.resp, nil
}

// serveKubelet answers the PodResources API with resp on a unix socket and
// returns its path.
func serveKubelet(t *testing.T, resp *podresourcesv1.ListPodResourcesResponse) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "kubelet") // a unix socket's path is short
	require.NoError(t, err)
	path := filepath.Join(dir, "kubelet.sock")
	ln, err := net.Listen("unix", path)
	require.NoError(t, err)
	srv := grpc.NewServer()
	podresourcesv1.RegisterPodResourcesListerServer(srv, &kubeletAnswer{resp: resp})
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
	t.Cleanup(func() {
		srv.Stop()
		<-done
		os.RemoveAll(dir)
	})
	return path
}

// allocated is a PodResources answer: each device id to its pod
// ("namespace/name") and container.
func allocated(devices map[string][3]string) *podresourcesv1.ListPodResourcesResponse {
	resp := &podresourcesv1.ListPodResourcesResponse{}
	for id, at := range devices {
		resp.PodResources = append(resp.PodResources, &podresourcesv1.PodResources{Namespace: at[0], Name: at[1],
			Containers: []*podresourcesv1.ContainerResources{{Name: at[2],
				Devices: []*podresourcesv1.ContainerDevices{{ResourceName: "nvidia.com/gpu", DeviceIds: []string{id}}}}}})
	}
	return resp
}
