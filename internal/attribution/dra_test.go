package attribution

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
)

const nvidiaDriver = "gpu.nvidia.com"

// claimed is a container whose DRA claim holds devices.
func claimed(name, claimNS, claim string, res ...*podresourcesv1.ClaimResource) *podresourcesv1.ContainerResources {
	return &podresourcesv1.ContainerResources{Name: name, DynamicResources: []*podresourcesv1.DynamicResource{
		{ClaimName: claim, ClaimNamespace: claimNS, ClaimResources: res},
	}}
}

func claimRes(driver, pool, device, shareID string) *podresourcesv1.ClaimResource {
	r := &podresourcesv1.ClaimResource{DriverName: driver, PoolName: pool, DeviceName: device}
	if shareID != "" {
		r.ShareId = &shareID
	}
	return r
}

// draAllocation is a node whose GPUs are allocated through DRA: one claim
// on gpu-2, one on a MIG device, one shared by two pods (gpu-3, one of them
// through a share_id), and claims of another driver.
func draAllocation() *podresourcesv1.ListPodResourcesResponse {
	return &podresourcesv1.ListPodResourcesResponse{PodResources: []*podresourcesv1.PodResources{
		pod("ml", "notebook-0", claimed("jupyter", "ml", "notebook-gpu", claimRes(nvidiaDriver, "node1", "gpu-2", ""))),
		pod("serve", "llm-0", claimed("server", "serve", "llm-mig", claimRes(nvidiaDriver, "node1", "gpu-0-mig-3g71gb-9-4", ""))),
		pod("team", "a-0", claimed("a", "team", "shared-gpu", claimRes(nvidiaDriver, "node1", "gpu-3", ""))),
		pod("team", "b-0", claimed("b", "team", "shared-gpu", claimRes(nvidiaDriver, "node1", "gpu-3", "4d1b8f0e-0000-4000-8000-000000000001"))),
		pod("net", "nic-0", claimed("app", "net", "rdma", claimRes("rdma.example.com", "node1", "gpu-2", ""))),
	}}
}

func TestDRAClaimsIndexed(t *testing.T) {
	s := buildSnapshot(draAllocation(), DefaultResourcePrefixes(), DefaultDRADrivers()...)
	assert.Empty(t, s.byID, "DRA devices are not device-plugin ids")
	assert.Equal(t, []DRADevice{
		{nvidiaDriver, "node1", "gpu-0-mig-3g71gb-9-4"},
		{nvidiaDriver, "node1", "gpu-2"},
		{nvidiaDriver, "node1", "gpu-3"},
	}, s.claims.devices(), "the other driver's claim is left out")
	assert.Equal(t, []Owner{{PodName: "notebook-0", Namespace: "ml", ContainerName: "jupyter", ClaimName: "notebook-gpu"}},
		s.claims.byDevice[DRADevice{nvidiaDriver, "node1", "gpu-2"}])
	assert.Len(t, s.claims.byDevice[DRADevice{nvidiaDriver, "node1", "gpu-3"}], 2, "one claim, two pods: both listed")

	none := buildSnapshot(draAllocation(), DefaultResourcePrefixes())
	assert.Empty(t, none.claims.byDevice, "no drivers: no claims")
	old := buildSnapshot(nodeAllocation(), DefaultResourcePrefixes(), DefaultDRADrivers()...)
	assert.Nil(t, old.claims.byDevice, "a kubelet without dynamic_resources")
}

// startDRA starts an Attributor on a kubelet that serves resp, with the
// GPUs' minor numbers given.
func startDRA(t *testing.T, resp *podresourcesv1.ListPodResourcesResponse, slices *ResourceSlicesConfig, lw cache.ListerWatcher, logger *zap.Logger, minors map[string]int) *Attributor {
	t.Helper()
	sock := socketPath(t)
	k := &fakeKubelet{}
	k.set(resp, nil)
	serve(t, sock, k)
	cfg := Config{PodResources: &PodResourcesConfig{Socket: sock, RefreshInterval: 20 * time.Millisecond}, ResourceSlices: slices}
	a := New(cfg, logger)
	if lw != nil {
		a.slices.listWatch = func(ResourceSlicesConfig) (cache.ListerWatcher, error) { return lw, nil }
	}
	for u, m := range minors {
		a.SetMinor(u, m)
	}
	require.NoError(t, a.Start(t.Context()))
	t.Cleanup(func() { assert.NoError(t, a.Shutdown(context.Background())) })
	waitSynced(t, a.pods)
	return a
}

var draMinors = map[string]int{gpuMIG: 0, gpuTrain: 1, gpuIdle: 2, gpuShared: 3}

// draMIGs are the placements of the MIG devices of gpuMIG (minor 0), as
// NVML reports them: migInfer a 3g.71gb (GPU instance profile 9) at start
// 4, migBatch a 1g.18gb (profile 19) at start 0.
var draMIGs = map[string]MIGPlacement{
	migInfer: {ParentMinor: 0, ProfileID: 9, Start: 4},
	migBatch: {ParentMinor: 0, ProfileID: 19, Start: 0},
}

func setMIGs(a *Attributor, migs map[string]MIGPlacement) {
	for u, p := range migs {
		a.SetMIG(u, p)
	}
}

func TestDRAFallbackByMinorNumber(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	a := startDRA(t, draAllocation(), nil, nil, zap.New(core), draMinors)
	assert.False(t, a.Allocated(migInfer), "a MIG device of placement unknown is not matched")
	setMIGs(a, draMIGs)

	procs, gpu := a.Attribute(gpuIdle, nil)
	assert.Empty(t, procs)
	assert.Equal(t, Owner{PodName: "notebook-0", Namespace: "ml", ContainerName: "jupyter", ClaimName: "notebook-gpu"}, gpu,
		"gpu-2 is the GPU of minor number 2, held with no process")
	assert.True(t, a.Allocated(gpuIdle))
	assert.False(t, a.Allocated(gpuTrain), "minor 1: no claim")
	_, mig := a.Attribute(migInfer, nil)
	assert.Equal(t, Owner{PodName: "llm-0", Namespace: "serve", ContainerName: "server", ClaimName: "llm-mig"}, mig,
		"gpu-0-mig-3g71gb-9-4 is the MIG device of GPU instance profile 9 at start 4 on the GPU of minor 0")
	assert.False(t, a.Allocated(migBatch), "another placement of the same GPU")

	_, shared := a.Attribute(gpuShared, nil)
	assert.Zero(t, shared, "one claim held by two pods: no single owner")
	assert.True(t, a.Allocated(gpuShared))
	assert.Len(t, a.allocatedTo(gpuShared), 2, "each holder listed once")

	time.Sleep(60 * time.Millisecond) // a few refreshes
	assert.Zero(t, logs.Len(), "the fallback configured: nothing to say at each refresh")
}

func TestDRAClaimsOfKubeletsWithoutDRA(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	a := startDRA(t, nodeAllocation(), &ResourceSlicesConfig{NodeName: "node1"}, nil, zap.New(core), draMinors)
	assert.True(t, a.Allocated(gpuTrain), "the device plugin's allocation still counts")
	time.Sleep(60 * time.Millisecond)
	assert.Zero(t, logs.Len(), "no claims: the slices are not read, nothing is said")
	assert.Equal(t, slicesStarting, a.slices.state.Load())
}

// fakeSlices serves ResourceSlices to an informer: a list, then a watch
// the test drives; or a list error.
type fakeSlices struct {
	mu      sync.Mutex
	initial []resourceapi.ResourceSlice
	listErr error
	lists   int
	w       *watch.RaceFreeFakeWatcher
}

func (f *fakeSlices) List(metav1.ListOptions) (runtime.Object, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lists++
	if f.listErr != nil {
		return nil, f.listErr
	}
	return &resourceapi.ResourceSliceList{ListMeta: metav1.ListMeta{ResourceVersion: "1"}, Items: f.initial}, nil
}

func (f *fakeSlices) Watch(metav1.ListOptions) (watch.Interface, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.w == nil {
		f.w = watch.NewRaceFreeFake()
	}
	return f.w, nil
}

// IsWatchListSemanticsUnSupported makes the reflector list, then watch.
func (f *fakeSlices) IsWatchListSemanticsUnSupported() bool { return true }

func (f *fakeSlices) watcher(t *testing.T) *watch.RaceFreeFakeWatcher {
	t.Helper()
	var w *watch.RaceFreeFakeWatcher
	require.Eventually(t, func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		w = f.w
		return w != nil
	}, 5*time.Second, time.Millisecond)
	return w
}

type sliceDevice struct{ name, uuid string }

func slice(name, version string, devs ...sliceDevice) *resourceapi.ResourceSlice {
	node := "node1"
	s := &resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: version},
		Spec: resourceapi.ResourceSliceSpec{Driver: nvidiaDriver, NodeName: &node,
			Pool: resourceapi.ResourcePool{Name: "node1", ResourceSliceCount: 1}},
	}
	for _, d := range devs {
		dev := resourceapi.Device{Name: d.name, Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{}}
		if d.uuid != "" {
			u := d.uuid
			dev.Attributes["uuid"] = resourceapi.DeviceAttribute{StringValue: &u}
		}
		s.Spec.Devices = append(s.Spec.Devices, dev)
	}
	return s
}

func TestDRAResourceSlices(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	// gpu-2 is here the GPU of minor 1: the slices, not the names, say
	// which GPU a device is.
	f := &fakeSlices{initial: []resourceapi.ResourceSlice{*slice("node1-gpu", "1",
		sliceDevice{"gpu-2", gpuTrain}, sliceDevice{"gpu-3", gpuShared}, sliceDevice{"gpu-0-mig-3g71gb-9-4", migInfer})}}
	a := startDRA(t, draAllocation(), &ResourceSlicesConfig{NodeName: "node1"}, f, zap.New(core), draMinors)
	require.Eventually(t, func() bool { return a.Allocated(gpuTrain) }, 5*time.Second, time.Millisecond)

	_, gpu := a.Attribute(gpuTrain, nil)
	assert.Equal(t, "notebook-gpu", gpu.ClaimName)
	assert.False(t, a.Allocated(gpuIdle), "the slices are read: the minor number is not used")
	_, mig := a.Attribute(migInfer, nil)
	assert.Equal(t, Owner{PodName: "llm-0", Namespace: "serve", ContainerName: "server", ClaimName: "llm-mig"}, mig)
	assert.Len(t, a.allocatedTo(gpuShared), 2)

	// Changed: gpu-2 is now another GPU.
	w := f.watcher(t)
	w.Modify(slice("node1-gpu", "2", sliceDevice{"gpu-2", gpuIdle}, sliceDevice{"gpu-3", gpuShared}, sliceDevice{"gpu-0-mig-3g71gb-9-4", migInfer}))
	require.Eventually(t, func() bool { return a.Allocated(gpuIdle) && !a.Allocated(gpuTrain) }, 5*time.Second, time.Millisecond)
	// Deleted: nothing maps to a GPU, and nothing falls back.
	w.Delete(slice("node1-gpu", "3"))
	require.Eventually(t, func() bool { return !a.Allocated(gpuIdle) && !a.Allocated(migInfer) }, 5*time.Second, time.Millisecond)
	assert.False(t, a.Allocated(gpuShared))

	time.Sleep(60 * time.Millisecond) // refreshes: the claims' devices are missing now
	missing := logs.FilterMessageSnippet("no ResourceSlice of this node has")
	assert.Equal(t, 3, missing.Len(), "one line per missing device, not one per refresh: %v", missing.All())
}

func TestDRAResourceSliceWithoutUUID(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	f := &fakeSlices{initial: []resourceapi.ResourceSlice{*slice("node1-gpu", "1",
		sliceDevice{"gpu-2", ""}, sliceDevice{"gpu-3", gpuShared}, sliceDevice{"gpu-0-mig-3g71gb-9-4", migInfer})}}
	a := startDRA(t, draAllocation(), &ResourceSlicesConfig{NodeName: "node1"}, f, zap.New(core), draMinors)
	require.Eventually(t, func() bool { return a.Allocated(gpuShared) }, 5*time.Second, time.Millisecond)
	assert.False(t, a.Allocated(gpuIdle), "no uuid: not matched by its name's minor either")
	w := f.watcher(t)
	w.Modify(slice("node1-gpu", "2", sliceDevice{"gpu-2", ""}, sliceDevice{"gpu-3", gpuShared}))
	time.Sleep(60 * time.Millisecond)
	nouuid := logs.FilterMessageSnippet("without a uuid attribute")
	require.Equal(t, 1, nouuid.Len(), "once, though the slice changed: %v", logs.All())
	assert.Equal(t, "gpu-2", nouuid.All()[0].ContextMap()["device"])
}

func TestDRAResourceSlicesUnreadable(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	forbidden := apierrors.NewForbidden(schema.GroupResource{Group: "resource.k8s.io", Resource: "resourceslices"}, "",
		errors.New(`User "system:serviceaccount:monitoring:otelcol-nvml" cannot list resource "resourceslices"`))
	f := &fakeSlices{listErr: forbidden}
	a := startDRA(t, draAllocation(), &ResourceSlicesConfig{NodeName: "node1"}, f, zap.New(core), draMinors)
	require.Eventually(t, func() bool { return a.Allocated(gpuIdle) }, 5*time.Second, time.Millisecond, "the fallback")
	_, gpu := a.Attribute(gpuIdle, nil)
	assert.Equal(t, "notebook-gpu", gpu.ClaimName)
	assert.False(t, a.Allocated(migInfer), "its placement not told")
	setMIGs(a, draMIGs)
	assert.True(t, a.Allocated(migInfer), "the fallback matches a MIG device by its placement")
	require.Eventually(t, func() bool { f.mu.Lock(); defer f.mu.Unlock(); return f.lists >= 2 }, 5*time.Second, time.Millisecond)
	time.Sleep(60 * time.Millisecond)
	assert.Equal(t, 1, logs.FilterMessageSnippet("Cannot read the node's ResourceSlices").Len(), "said once: %v", logs.All())
	assert.Zero(t, logs.FilterMessageSnippet("holds a MIG device").Len(), "a MIG device name with its placement is matched: nothing to say")

	// Granted: the slices are read from then on, and that is said.
	f.mu.Lock()
	f.listErr, f.initial = nil, []resourceapi.ResourceSlice{*slice("node1-gpu", "1", sliceDevice{"gpu-2", gpuTrain})}
	f.mu.Unlock()
	require.Eventually(t, func() bool { return a.Allocated(gpuTrain) && !a.Allocated(gpuIdle) }, 10*time.Second, 5*time.Millisecond)
	assert.Equal(t, 1, logs.FilterMessageSnippet("read again").Len())
}

func TestDRANoNodeName(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	a := startDRA(t, draAllocation(), &ResourceSlicesConfig{}, nil, zap.New(core), draMinors)
	require.Eventually(t, func() bool { return a.slices.state.Load() == slicesUnreadable }, 5*time.Second, time.Millisecond)
	assert.True(t, a.Allocated(gpuIdle), "the fallback")
	time.Sleep(60 * time.Millisecond)
	l := logs.FilterMessageSnippet("Cannot read the node's ResourceSlices")
	require.Equal(t, 1, l.Len())
	assert.Contains(t, l.All()[0].ContextMap()["error"], "node_name")
}
