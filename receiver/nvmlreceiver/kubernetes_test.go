package nvmlreceiver

import (
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmltest"
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
		assert.Equal(t, "0d3e0c8a-1111-4222-8333-944455556666", processResources(md, nvmltest.UUID(0))[4242]["k8s.pod.uid"])
	}
}

func TestMissingKubeletSocket(t *testing.T) {
	ts := newTestScraper(t, nvmltest.NewH200(), func(cfg *Config) {
		cfg.Kubernetes.Enabled = true
		cfg.Kubernetes.PodResourcesSocket = filepath.Join(t.TempDir(), "absent.sock")
	})
	ts.start(t)
	assert.Len(t, resourceIDs(ts.scrapeOK(t)), 8)
}
