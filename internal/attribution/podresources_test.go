package attribution

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
)

const (
	gpuTrain  = "GPU-5e5a3c16-7d0e-4ab5-9f0c-2f6e3b1a8c41"
	gpuMIG    = "GPU-0b7f0a2e-4c9d-4e61-8a53-96d1c2e4f7b8"
	migInfer  = "MIG-1f2d4b6a-8c0e-5a7b-9d1f-3e5a7c9b1d2f"
	migBatch  = "MIG-7a9c1e3f-5b7d-5f9a-b1c3-e5f7a9b1c3d5"
	gpuSliced = "GPU-9c8b7a6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d"
	gpuShared = "GPU-3d4e5f6a-7b8c-4d9e-a0f1-b2c3d4e5f6a7"
	gpuIdle   = "GPU-e1d2c3b4-a5f6-4e7d-8c9b-0a1b2c3d4e5f"
)

func dev(resource string, ids ...string) *podresourcesv1.ContainerDevices {
	return &podresourcesv1.ContainerDevices{ResourceName: resource, DeviceIds: ids}
}

func pod(ns, name string, ctrs ...*podresourcesv1.ContainerResources) *podresourcesv1.PodResources {
	return &podresourcesv1.PodResources{Namespace: ns, Name: name, Containers: ctrs}
}

func ctr(name string, devs ...*podresourcesv1.ContainerDevices) *podresourcesv1.ContainerResources {
	return &podresourcesv1.ContainerResources{Name: name, Devices: devs}
}

// nodeAllocation is a node with whole GPUs, MIG devices, time-slicing
// replicas, other devices and pods without devices.
func nodeAllocation() *podresourcesv1.ListPodResourcesResponse {
	return &podresourcesv1.ListPodResourcesResponse{PodResources: []*podresourcesv1.PodResources{
		pod("ml", "trainer-0", ctr("trainer", dev("nvidia.com/gpu", gpuTrain)), ctr("logger")),
		pod("serve", "llm-0", ctr("server", dev("nvidia.com/mig-3g.71gb", migInfer))),
		pod("batch", "etl-1", ctr("worker", dev("nvidia.com/mig-1g.18gb", migBatch), dev("example.com/fpga", "fpga-0"))),
		pod("dev", "notebook-a", ctr("jupyter", dev("nvidia.com/gpu", gpuSliced+"::0"))),
		pod("dev", "notebook-b", ctr("jupyter", dev("nvidia.com/gpu", gpuSliced+"::1"))),
		pod("dev", "notebook-c", ctr("jupyter", dev("nvidia.com/gpu.shared", gpuShared+"::3", gpuShared+"::4"))),
		pod("kube-system", "coredns-5d78c9869d-x2x7q", ctr("coredns")),
		pod("kube-system", "fpga-user", ctr("app", dev("example.com/fpga", gpuIdle))),
	}}
}

// fakeKubelet serves PodResources v1 from the official generated code.
type fakeKubelet struct {
	podresourcesv1.UnimplementedPodResourcesListerServer

	mu       sync.Mutex
	resp     *podresourcesv1.ListPodResourcesResponse
	block    chan struct{} // when set, List waits on it or on its context
	calls    atomic.Int64
	inFlight atomic.Int64 // Lists waiting on block now
}

func (k *fakeKubelet) set(resp *podresourcesv1.ListPodResourcesResponse, block chan struct{}) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.resp, k.block = resp, block
}

func (k *fakeKubelet) List(ctx context.Context, _ *podresourcesv1.ListPodResourcesRequest) (*podresourcesv1.ListPodResourcesResponse, error) {
	k.calls.Add(1)
	k.mu.Lock()
	resp, block := k.resp, k.block
	k.mu.Unlock()
	if block != nil {
		k.inFlight.Add(1)
		defer k.inFlight.Add(-1)
		select {
		case <-block:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return resp, nil
}

// serve runs k on a unix socket at path until the returned stop is called
// (and at the end of the test).
func serve(t *testing.T, path string, k *fakeKubelet) (stop func()) {
	t.Helper()
	lis, err := net.Listen("unix", path)
	require.NoError(t, err)
	srv := grpc.NewServer()
	podresourcesv1.RegisterPodResourcesListerServer(srv, k)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(lis)
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			srv.Stop()
			<-done
		})
	}
	t.Cleanup(stop)
	return stop
}

// socketPath returns a short path for a unix socket (their paths are
// limited to 107 bytes).
func socketPath(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "podres")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	return filepath.Join(dir, "kubelet.sock")
}

func startCache(t *testing.T, cfg PodResourcesConfig, logger *zap.Logger) *PodResourcesCache {
	t.Helper()
	c := NewPodResourcesCache(cfg, logger)
	require.NoError(t, c.Start(context.Background()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		assert.NoError(t, c.Shutdown(ctx))
	})
	return c
}

func waitSynced(t *testing.T, c *PodResourcesCache) {
	t.Helper()
	require.Eventually(t, func() bool { _, ok := c.synced(); return ok }, 5*time.Second, 5*time.Millisecond)
}

func TestPodResourcesAttribution(t *testing.T) {
	sock := socketPath(t)
	k := &fakeKubelet{}
	k.set(nodeAllocation(), nil)
	serve(t, sock, k)
	core, logs := observer.New(zapcore.InfoLevel)
	c := startCache(t, PodResourcesConfig{Socket: sock, RefreshInterval: time.Hour, Timeout: 5 * time.Second}, zap.New(core))
	waitSynced(t, c)

	trainer := Owner{PodName: "trainer-0", Namespace: "ml", ContainerName: "trainer"}
	llm := Owner{PodName: "llm-0", Namespace: "serve", ContainerName: "server"}
	etl := Owner{PodName: "etl-1", Namespace: "batch", ContainerName: "worker"}
	nbA := Owner{PodName: "notebook-a", Namespace: "dev", ContainerName: "jupyter"}
	nbB := Owner{PodName: "notebook-b", Namespace: "dev", ContainerName: "jupyter"}
	nbC := Owner{PodName: "notebook-c", Namespace: "dev", ContainerName: "jupyter"}

	lookups := []struct {
		id   string
		want Owner
		ok   bool
	}{
		{id: gpuTrain, want: trainer, ok: true},
		{id: migInfer, want: llm, ok: true},
		{id: migBatch, want: etl, ok: true},
		{id: gpuSliced + "::0", want: nbA, ok: true},
		{id: gpuSliced + "::1", want: nbB, ok: true},
		{id: gpuSliced},                      // two pods share it
		{id: gpuShared, want: nbC, ok: true}, // every replica in one pod
		{id: gpuShared + "::4", want: nbC, ok: true},
		{id: gpuIdle},  // allocated as another vendor's resource: not a GPU
		{id: "fpga-0"}, // another vendor's resource
		{id: gpuMIG},   // its MIG devices are allocated, not the GPU
		{id: ""},
	}
	for _, l := range lookups {
		got, ok := c.lookup(l.id)
		assert.Equal(t, l.ok, ok, l.id)
		assert.Equal(t, l.want, got, l.id)
	}
	assert.Equal(t, []Owner{nbA, nbB}, c.Owners(gpuSliced))
	// A GPU with its MIG devices: everything allocated on it, each once.
	assert.Equal(t, []Owner{etl, llm}, c.Owners(gpuMIG, migInfer, migBatch, migInfer))
	assert.Nil(t, c.Owners(gpuIdle))
	assert.Equal(t, int64(1), k.calls.Load())
	assert.Zero(t, logs.FilterLevelExact(zapcore.WarnLevel).Len())

	// A GPU's resource, from its allocation and its processes.
	got, ok := gpuOwner(c.Owners(gpuTrain), []Owner{{ContainerID: idBurstable, PodUID: uidBurstable}})
	require.True(t, ok)
	assert.Equal(t, Owner{ContainerID: idBurstable, PodUID: uidBurstable, PodName: "trainer-0", Namespace: "ml", ContainerName: "trainer"}, got)
	_, ok = gpuOwner(c.Owners(gpuSliced), nil)
	assert.False(t, ok)
}

func TestPodResourcesRefreshes(t *testing.T) {
	sock := socketPath(t)
	k := &fakeKubelet{}
	k.set(nodeAllocation(), nil)
	serve(t, sock, k)
	c := startCache(t, PodResourcesConfig{Socket: sock, RefreshInterval: 10 * time.Millisecond, Timeout: time.Second}, nil)
	waitSynced(t, c)
	_, ok := c.lookup(gpuTrain)
	require.True(t, ok)

	// The pod ends, another one takes the GPU.
	k.set(&podresourcesv1.ListPodResourcesResponse{PodResources: []*podresourcesv1.PodResources{
		pod("ml", "trainer-1", ctr("trainer", dev("nvidia.com/gpu", gpuTrain))),
	}}, nil)
	require.Eventually(t, func() bool {
		o, ok := c.lookup(gpuTrain)
		return ok && o.PodName == "trainer-1"
	}, 5*time.Second, 5*time.Millisecond)
	_, ok = c.lookup(migInfer)
	assert.False(t, ok, "gone from the allocation, gone from the cache")

	// An empty node is a good answer too.
	k.set(&podresourcesv1.ListPodResourcesResponse{}, nil)
	require.Eventually(t, func() bool { return c.Owners(gpuTrain) == nil }, 5*time.Second, 5*time.Millisecond)
}

func TestPodResourcesMissingSocket(t *testing.T) {
	sock := socketPath(t)
	core, logs := observer.New(zapcore.InfoLevel)
	c := startCache(t, PodResourcesConfig{Socket: sock, RefreshInterval: 10 * time.Millisecond, Timeout: time.Second}, zap.New(core))

	// Many refreshes fail the same way: one warning.
	require.Eventually(t, func() bool { return logs.Len() > 0 }, 5*time.Second, 5*time.Millisecond)
	time.Sleep(150 * time.Millisecond)
	warns := logs.FilterLevelExact(zapcore.WarnLevel).All()
	require.Len(t, warns, 1)
	assert.Contains(t, warns[0].ContextMap()["error"], "no such file or directory")
	assert.Equal(t, sock, warns[0].ContextMap()["socket"])
	_, synced := c.synced()
	assert.False(t, synced)
	_, ok := c.lookup(gpuTrain)
	assert.False(t, ok)
	assert.Nil(t, c.Owners(gpuTrain, migInfer))

	// The kubelet comes up: the cache fills, and says so once.
	k := &fakeKubelet{}
	k.set(nodeAllocation(), nil)
	serve(t, sock, k)
	require.Eventually(t, func() bool { _, ok := c.lookup(gpuTrain); return ok }, 5*time.Second, 5*time.Millisecond)
	require.Eventually(t, func() bool { return logs.FilterMessageSnippet("answer again").Len() > 0 }, 5*time.Second, 5*time.Millisecond)
	time.Sleep(50 * time.Millisecond)
	assert.Equal(t, 1, logs.FilterMessageSnippet("answer again").Len())
	// A connection refused between the new socket's bind and listen is
	// another error, and may be logged too; the missing socket was logged
	// once.
	assert.Equal(t, 1, logs.FilterFieldKey("error").Filter(func(e observer.LoggedEntry) bool {
		return strings.Contains(e.ContextMap()["error"].(string), "no such file")
	}).Len())
}

// Start does not wait for the kubelet: with a List that hangs for as long
// as the (hour-long) timeout, Start returns while that List is in flight.
func TestPodResourcesStartDoesNotWaitForTheKubelet(t *testing.T) {
	sock := socketPath(t)
	k := &fakeKubelet{}
	block := make(chan struct{})
	defer close(block)
	k.set(nodeAllocation(), block)
	serve(t, sock, k)
	c := NewPodResourcesCache(PodResourcesConfig{Socket: sock, RefreshInterval: time.Hour, Timeout: time.Hour, MaxAge: time.Hour}, zap.NewNop())
	started := make(chan error, 1)
	go func() { started <- c.Start(context.Background()) }()
	select {
	case err := <-started:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("Start waited for the kubelet's List")
	}
	t.Cleanup(func() { assert.NoError(t, c.Shutdown(context.Background())) })
	require.Eventually(t, func() bool { return k.inFlight.Load() == 1 }, 5*time.Second, time.Millisecond, "the first List runs, in the background")
	_, ok := c.lookup(gpuTrain)
	assert.False(t, ok, "nothing listed yet")
}

func TestPodResourcesSlowServer(t *testing.T) {
	sock := socketPath(t)
	k := &fakeKubelet{}
	k.set(nodeAllocation(), nil)
	serve(t, sock, k)
	core, logs := observer.New(zapcore.InfoLevel)
	c := startCache(t, PodResourcesConfig{Socket: sock, RefreshInterval: 20 * time.Millisecond, Timeout: 300 * time.Millisecond,
		MaxAge: time.Minute}, zap.New(core))
	waitSynced(t, c)
	want, ok := c.lookup(gpuTrain)
	require.True(t, ok)

	// The kubelet hangs: every List runs into the timeout.
	block := make(chan struct{})
	defer close(block)
	k.set(&podresourcesv1.ListPodResourcesResponse{}, block)
	callsBefore := k.calls.Load()
	require.Eventually(t, func() bool { return k.calls.Load() > callsBefore }, 5*time.Second, time.Millisecond)

	// While a List hangs, lookups answer from the last good allocation:
	// a scrape is never held back. A lookup that began and ended inside
	// one hung List (the same call, still waiting, on both sides) did not
	// wait for it; one that waited would see that List time out first, so
	// none would. This counts them rather than timing them (a loaded CI
	// machine stretches any wall-clock bound).
	var lookups, duringOneHungList int
	deadline := time.Now().Add(700 * time.Millisecond)
	for time.Now().Before(deadline) {
		callBefore, hungBefore := k.calls.Load(), k.inFlight.Load()
		got, ok := c.lookup(gpuTrain)
		_ = c.Owners(gpuMIG, migInfer, migBatch)
		if hungBefore == 1 && k.inFlight.Load() == 1 && k.calls.Load() == callBefore {
			duringOneHungList++
		}
		lookups++
		require.True(t, ok)
		require.Equal(t, want, got)
		time.Sleep(time.Millisecond)
	}
	t.Logf("%d of %d lookups began and ended inside one hung List", duringOneHungList, lookups)
	assert.Positive(t, duringOneHungList)

	warns := logs.FilterLevelExact(zapcore.WarnLevel).All()
	require.Len(t, warns, 1, "a timeout that repeats is logged once")
	assert.Contains(t, warns[0].ContextMap()["error"], "DeadlineExceeded")

	// Shutdown cancels the List in flight rather than waiting it out.
	k.set(&podresourcesv1.ListPodResourcesResponse{}, make(chan struct{}))
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	start := time.Now()
	require.NoError(t, c.Shutdown(ctx))
	assert.Less(t, time.Since(start), 500*time.Millisecond)
	_, ok = c.lookup(gpuTrain)
	assert.True(t, ok, "the last good allocation stays readable after Shutdown")
}

// Issue 9, defect 11: a kubelet that answered once and then hung kept its
// pod names for ever. Past MaxAge they are dropped (cgroup attribution
// only), in one log line, and come back when it answers.
func TestPodResourcesExpire(t *testing.T) {
	sock := socketPath(t)
	k := &fakeKubelet{}
	k.set(nodeAllocation(), nil)
	serve(t, sock, k)
	core, logs := observer.New(zapcore.InfoLevel)
	c := startCache(t, PodResourcesConfig{Socket: sock, RefreshInterval: 20 * time.Millisecond, Timeout: 50 * time.Millisecond,
		MaxAge: 300 * time.Millisecond}, zap.New(core))
	waitSynced(t, c)
	_, ok := c.lookup(gpuTrain)
	require.True(t, ok)

	block := make(chan struct{})
	k.set(nodeAllocation(), block)
	require.Eventually(t, func() bool { _, ok := c.lookup(gpuTrain); return !ok }, 5*time.Second, 5*time.Millisecond)
	assert.Nil(t, c.Owners(gpuTrain, migInfer))
	require.Eventually(t, func() bool { return logs.FilterMessageSnippet("too old").Len() == 1 }, 5*time.Second, 5*time.Millisecond)
	time.Sleep(100 * time.Millisecond)
	assert.Equal(t, 1, logs.FilterMessageSnippet("too old").Len(), "logged once")

	close(block)
	k.set(nodeAllocation(), nil)
	require.Eventually(t, func() bool { _, ok := c.lookup(gpuTrain); return ok }, 5*time.Second, 5*time.Millisecond)
}

func TestDefaultMaxAge(t *testing.T) {
	assert.Equal(t, 95*time.Second, defaultMaxAge(30*time.Second, 5*time.Second))
	c := NewPodResourcesCache(PodResourcesConfig{Socket: "/x.sock"}, nil)
	assert.Equal(t, 95*time.Second, c.cfg.MaxAge)
}

// Issue 9, defect 11: a refresh against a missing socket produced two
// warnings, ours and gRPC's own transport warning. The socket is dialled
// before gRPC sees it, so that the failure is ours alone (not a gRPC
// status), logged once however often it repeats.
func TestPodResourcesDialFailureIsNotAGRPCError(t *testing.T) {
	c := NewPodResourcesCache(PodResourcesConfig{Socket: socketPath(t)}, nil)
	_, err := c.refresh(context.Background())
	require.Error(t, err)
	_, isStatus := status.FromError(err)
	assert.False(t, isStatus, "gRPC never dialled: %v", err)
	assert.Contains(t, err.Error(), "no such file or directory")
}

func TestPodResourcesServerRestart(t *testing.T) {
	sock := socketPath(t)
	k1 := &fakeKubelet{}
	k1.set(nodeAllocation(), nil)
	stop := serve(t, sock, k1)
	core, logs := observer.New(zapcore.InfoLevel)
	c := startCache(t, PodResourcesConfig{Socket: sock, RefreshInterval: 10 * time.Millisecond, Timeout: time.Second}, zap.New(core))
	waitSynced(t, c)
	before, ok := c.lookup(gpuTrain)
	require.True(t, ok)

	// The kubelet goes away: the last good allocation is kept.
	stop()
	require.Eventually(t, func() bool { return logs.FilterLevelExact(zapcore.WarnLevel).Len() > 0 }, 5*time.Second, 5*time.Millisecond)
	got, ok := c.lookup(gpuTrain)
	require.True(t, ok)
	assert.Equal(t, before, got)

	// A new kubelet on the same path, with the pods rescheduled.
	k2 := &fakeKubelet{}
	k2.set(&podresourcesv1.ListPodResourcesResponse{PodResources: []*podresourcesv1.PodResources{
		pod("ml", "trainer-0-restarted", ctr("trainer", dev("nvidia.com/gpu", gpuTrain))),
	}}, nil)
	serve(t, sock, k2)
	require.Eventually(t, func() bool {
		o, ok := c.lookup(gpuTrain)
		return ok && o.PodName == "trainer-0-restarted"
	}, 5*time.Second, 5*time.Millisecond)
	assert.Positive(t, k2.calls.Load())
	// The recovery is logged just after the new allocation is stored.
	require.Eventually(t, func() bool { return logs.FilterMessageSnippet("answer again").Len() > 0 }, 5*time.Second, 5*time.Millisecond)
	time.Sleep(50 * time.Millisecond)
	assert.Equal(t, 1, logs.FilterMessageSnippet("answer again").Len())
}

func TestPodResourcesLifecycle(t *testing.T) {
	c := NewPodResourcesCache(PodResourcesConfig{Socket: socketPath(t)}, nil)
	assert.NoError(t, c.Shutdown(context.Background()), "Shutdown before Start")
	require.NoError(t, c.Start(context.Background()))
	assert.Error(t, c.Start(context.Background()))
	assert.NoError(t, c.Shutdown(context.Background()))
	assert.NoError(t, c.Shutdown(context.Background()))
	_, ok := c.lookup(gpuTrain)
	assert.False(t, ok)
}

func TestPodResourcesConfig(t *testing.T) {
	def := DefaultPodResourcesConfig()
	assert.Equal(t, DefaultPodResourcesSocket, def.Socket)

	c := NewPodResourcesCache(PodResourcesConfig{}, nil)
	assert.Equal(t, def.Socket, c.cfg.Socket)
	assert.Equal(t, def.RefreshInterval, c.cfg.RefreshInterval)
	assert.Equal(t, def.Timeout, c.cfg.Timeout)
	assert.Equal(t, DefaultResourcePrefixes(), c.prefixes)

	c.prefixes[0] = "example.com/gpu"
	assert.Equal(t, "nvidia.com/gpu", DefaultResourcePrefixes()[0], "the defaults cannot be changed through a cache")
}

// Review 3, finding 5: GKE's device plugin lists nvidia.com/gpu as
// "nvidia0" ("nvidia0/vgpu0" when time-shared), NVIDIA's with
// DEVICE_ID_STRATEGY=index as "0". The List succeeded, no GPU UUID
// matched, and nothing said why GPUs had no pod names. One warning per
// cause says so now, however many refreshes.
func TestPodResourcesNonUUIDDeviceIDsAreLogged(t *testing.T) {
	tests := []struct {
		name string
		devs []*podresourcesv1.ContainerDevices
		want string // in the warning's ids; "": no warning
	}{
		{name: "GKE", devs: []*podresourcesv1.ContainerDevices{dev("nvidia.com/gpu", "nvidia0", "nvidia1")}, want: "nvidia0"},
		{name: "GKE time-shared", devs: []*podresourcesv1.ContainerDevices{dev("nvidia.com/gpu", "nvidia0/vgpu3")}, want: "nvidia0/vgpu3"},
		{name: "NVIDIA's, index strategy", devs: []*podresourcesv1.ContainerDevices{dev("nvidia.com/gpu", "0"), dev("nvidia.com/mig-1g.18gb", "1:0")}, want: "1:0"},
		{name: "NVIDIA's, index strategy, time-sliced", devs: []*podresourcesv1.ContainerDevices{dev("nvidia.com/gpu", "0::1")}, want: "0::1"},
		{name: "UUIDs", devs: []*podresourcesv1.ContainerDevices{dev("nvidia.com/gpu", gpuTrain, gpuSliced+"::1"), dev("nvidia.com/mig-3g.71gb", migInfer)}},
		{name: "UUIDs beside another plugin's ids", devs: []*podresourcesv1.ContainerDevices{dev("nvidia.com/gpu", gpuTrain, "nvidia1")}},
		{name: "another vendor's devices", devs: []*podresourcesv1.ContainerDevices{dev("example.com/fpga", "fpga-0")}},
		{name: "no devices"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sock := socketPath(t)
			k := &fakeKubelet{}
			k.set(&podresourcesv1.ListPodResourcesResponse{PodResources: []*podresourcesv1.PodResources{
				pod("ml", "trainer-0", ctr("trainer", tt.devs...)),
			}}, nil)
			serve(t, sock, k)
			core, logs := observer.New(zapcore.InfoLevel)
			startCache(t, PodResourcesConfig{Socket: sock, RefreshInterval: 5 * time.Millisecond, Timeout: time.Second}, zap.New(core))
			// Each refresh logs before the next List.
			require.Eventually(t, func() bool { return k.calls.Load() >= 4 }, 5*time.Second, time.Millisecond)
			warns := logs.FilterLevelExact(zapcore.WarnLevel)
			if tt.want == "" {
				assert.Zero(t, warns.Len(), "%v", warns.All())
				return
			}
			require.Equal(t, 1, warns.Len(), "once, not per refresh")
			w := warns.All()[0]
			assert.Contains(t, w.Message, "pod names")
			assert.Contains(t, w.Message, "DEVICE_ID_STRATEGY=uuid")
			assert.Contains(t, w.ContextMap()["device_ids"], tt.want)
		})
	}
}

func TestReplicaBase(t *testing.T) {
	for id, want := range map[string]string{
		gpuTrain + "::0":  gpuTrain,
		gpuTrain + "::12": gpuTrain,
		"0::3":            "0",
		gpuTrain:          "",
		gpuTrain + "::":   "",
		gpuTrain + "::x":  "",
		"::1":             "",
	} {
		got, ok := replicaBase(id)
		assert.Equal(t, want != "", ok, id)
		assert.Equal(t, want, got, id)
	}
}

// lookup is the one container or pod that deviceID is allocated to, as
// singleOwner of Owners(deviceID).
func (c *PodResourcesCache) lookup(deviceID string) (Owner, bool) {
	return singleOwner(c.Owners(deviceID))
}

// synced reports whether a List has succeeded, and when the allocation now
// served was listed.
func (c *PodResourcesCache) synced() (time.Time, bool) {
	s := c.snap.Load()
	if s == nil {
		return time.Time{}, false
	}
	return s.at, true
}
