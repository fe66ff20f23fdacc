package attribution

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/yaml"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
)

func TestParseMIGName(t *testing.T) {
	for _, tc := range []struct {
		name string
		want MIGPlacement
		ok   bool
	}{
		{name: "gpu-0-mig-1g18gb-19-0", want: MIGPlacement{0, 19, 0}, ok: true},
		{name: "gpu-7-mig-3g71gb-9-4", want: MIGPlacement{7, 9, 4}, ok: true},
		{name: "gpu-12-mig-7g141gb-0-0", want: MIGPlacement{12, 0, 0}, ok: true},
		{name: "gpu-1-mig-1g18gb-me-20-6", want: MIGPlacement{1, 20, 6}, ok: true}, // 1g.18gb+me
		{name: "gpu-0-mig-1c2g35gb-14-2", want: MIGPlacement{0, 14, 2}, ok: true},  // a compute instance profile
		{name: "gpu-0-mig-19-0-1", want: MIGPlacement{0, 19, 0}, ok: true},         // up to v25.8: id, start, size
		{name: "gpu-1-mig-9-4-4", want: MIGPlacement{1, 9, 4}, ok: true},           // up to v25.8
		{name: "gpu-0"},                           // a whole GPU
		{name: "gpu-0-mig-1g18gb-19"},             // no start
		{name: "gpu-0-mig-19-0"},                  // two numbers only
		{name: "gpu-0-mig-19-0-1-2"},              // four numbers
		{name: "gpu-x-mig-1g18gb-19-0"},           // no minor
		{name: "gpu--mig-1g18gb-19-0"},            // empty minor
		{name: "gpu-0-mig--19-0"},                 // no profile
		{name: "gpu-0-mig-1g18gb-+19-0"},          // not a plain number
		{name: "gpu-0-mig-1g18gb-19-99999999999"}, // too large
		{name: "vgpu-0-mig-1g18gb-19-0"},          // another prefix
		{name: "gpu-vfio-0"},                      // passthrough
		{name: "gpu-0-mig-1g.5gb-0"},              // NVIDIA's docs' sample, not the code's
	} {
		got, ok := ParseMIGName(tc.name)
		assert.Equal(t, tc.ok, ok, tc.name)
		assert.Equal(t, tc.want, got, tc.name)
	}
}

// FuzzParseMIGName: any name parses without panic, and a placement read
// out of a name is read back out of the driver's name of it, under both
// forms.
func FuzzParseMIGName(f *testing.F) {
	for _, s := range []string{"gpu-0-mig-1g18gb-19-0", "gpu-1-mig-1g18gb-me-20-6", "gpu-0-mig-19-0-1", "gpu-0", "gpu-0-mig-", "gpu-0-mig-a--1-2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		p, ok := ParseMIGName(name)
		if !ok {
			assert.Zero(t, p)
			return
		}
		assert.GreaterOrEqual(t, min(p.ParentMinor, p.ProfileID, p.Start), 0)
		for _, n := range []string{
			"gpu-" + itoa(p.ParentMinor) + "-mig-1g18gb-" + itoa(p.ProfileID) + "-" + itoa(p.Start),
			"gpu-" + itoa(p.ParentMinor) + "-mig-" + itoa(p.ProfileID) + "-" + itoa(p.Start) + "-1",
		} {
			back, ok := ParseMIGName(n)
			assert.True(t, ok, n)
			assert.Equal(t, p, back, n)
		}
	})
}

func itoa(n int) string { return fallbackName(n)[len("gpu-"):] }

// loadSlices reads a fixture of ResourceSlices shaped as NVIDIA's DRA
// driver publishes them.
func loadSlices(t *testing.T, file string) []resourceapi.ResourceSlice {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "resourceslices", file))
	require.NoError(t, err)
	var l resourceapi.ResourceSliceList
	require.NoError(t, yaml.UnmarshalStrict(b, &l), file)
	require.NotEmpty(t, l.Items)
	return l.Items
}

// The MIG devices that NVIDIA's DRA driver made for claims on a node of
// dynamic MIG (testdata/resourceslices/dynamic-mig.yaml), as NVML lists
// them once made: their own UUIDs, which no slice knows.
const (
	dynMIGa = "MIG-9b1d3f5a-7c9e-5b1d-a3f5-c7e9b1d3f5a7" // gpu-0-mig-1g18gb-19-3
	dynMIGb = "MIG-4e6a8c0e-2a4c-5e6a-8c0e-2a4c6e8a0c2e" // gpu-1-mig-3g71gb-9-4
	dynMIGc = "MIG-6c8e0a2c-4e6a-5c8e-9a2c-4e6a8c0e2a4c" // gpu-1-mig-1g18gb-me-20-0
	dynMIGd = "MIG-8a0c2e4a-6c8e-5a0c-b2e4-6c8e0a2c4e6a" // gpu-0-mig-1g18gb-19-4: made, not claimed
	dynMIGe = "MIG-3a5c7e9a-1c3e-5a5c-8e9a-1c3e5a7c9e1a" // gpu-1-mig-1g18gb-19-3: dynMIGa's placement on the other GPU
)

var dynMIGs = map[string]MIGPlacement{
	dynMIGa: {0, 19, 3}, dynMIGb: {1, 9, 4}, dynMIGc: {1, 20, 0}, dynMIGd: {0, 19, 4}, dynMIGe: {1, 19, 3},
}

// dynamicMIGClaims: four claims on MIG devices made on demand (two of one
// placement on two GPUs), one on a whole GPU, and one on a device no slice
// has.
func dynamicMIGClaims() *podresourcesv1.ListPodResourcesResponse {
	return &podresourcesv1.ListPodResourcesResponse{PodResources: []*podresourcesv1.PodResources{
		pod("serve", "small-0", claimed("server", "serve", "small", claimRes(nvidiaDriver, "node1", "gpu-0-mig-1g18gb-19-3", ""))),
		pod("serve", "small-1", claimed("server", "serve", "small-1", claimRes(nvidiaDriver, "node1", "gpu-1-mig-1g18gb-19-3", ""))),
		pod("serve", "big-0", claimed("server", "serve", "big", claimRes(nvidiaDriver, "node1", "gpu-1-mig-3g71gb-9-4", ""))),
		pod("media", "enc-0", claimed("enc", "media", "enc", claimRes(nvidiaDriver, "node1", "gpu-1-mig-1g18gb-me-20-0", ""))),
		pod("ml", "train-0", claimed("trainer", "ml", "whole", claimRes(nvidiaDriver, "node1", "gpu-0", ""))),
		pod("ml", "lost-0", claimed("trainer", "ml", "lost", claimRes(nvidiaDriver, "node1", "gpu-7", ""))),
	}}
}

func TestDRADynamicMIGBySlices(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	f := &fakeSlices{initial: loadSlices(t, "dynamic-mig.yaml")}
	a := startDRA(t, dynamicMIGClaims(), &ResourceSlicesConfig{NodeName: "node1"}, f, zap.New(core),
		map[string]int{gpuMIG: 0, gpuTrain: 1})
	setMIGs(a, dynMIGs)
	require.Eventually(t, func() bool { return a.Allocated(gpuMIG) }, 5*time.Second, time.Millisecond)

	for _, tc := range []struct {
		uuid string
		want Owner
	}{
		{dynMIGa, Owner{PodName: "small-0", Namespace: "serve", ContainerName: "server", ClaimName: "small"}},
		{dynMIGb, Owner{PodName: "big-0", Namespace: "serve", ContainerName: "server", ClaimName: "big"}},
		{dynMIGc, Owner{PodName: "enc-0", Namespace: "media", ContainerName: "enc", ClaimName: "enc"}},
		{dynMIGe, Owner{PodName: "small-1", Namespace: "serve", ContainerName: "server", ClaimName: "small-1"}},
	} {
		_, o := a.Attribute(tc.uuid, nil)
		assert.Equal(t, tc.want, o, tc.uuid)
		assert.Equal(t, []Owner{tc.want}, a.Holders(tc.uuid), "held once: %s", tc.uuid)
	}
	assert.False(t, a.Allocated(dynMIGd), "made on the same GPU, another placement: not claimed")
	assert.False(t, a.Allocated(gpuTrain), "the MIG claims are their MIG devices', not the parent's")
	assert.Equal(t, []Owner{{PodName: "train-0", Namespace: "ml", ContainerName: "trainer", ClaimName: "whole"}}, a.Holders(gpuMIG),
		"gpu-0 by its uuid")

	time.Sleep(60 * time.Millisecond) // refreshes
	assert.Zero(t, logs.FilterMessageSnippet("without a uuid attribute").Len(),
		"the 50 MIG devices without a uuid are matched by name: no warning")
	missing := logs.FilterMessageSnippet("no ResourceSlice of this node has")
	require.Equal(t, 1, missing.Len(), "the one device no slice has is said, within the budget: %v", logs.All())
	assert.Equal(t, "gpu-7", missing.All()[0].ContextMap()["device"])
}

// A device with a uuid is matched by it alone: a MIG device listed with
// another uuid at the same placement (a slice not yet republished after the
// device was made again) is not taken for it.
func TestDRAStaticMIGBySlices(t *testing.T) {
	for _, tc := range []struct{ file, batch, infer string }{
		{"static-mig.yaml", "gpu-0-mig-1g18gb-19-0", "gpu-0-mig-3g71gb-9-4"},
		{"static-mig-v25.8.yaml", "gpu-0-mig-19-0-1", "gpu-0-mig-9-4-4"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			core, logs := observer.New(zapcore.InfoLevel)
			claims := &podresourcesv1.ListPodResourcesResponse{PodResources: []*podresourcesv1.PodResources{
				pod("batch", "etl-1", claimed("worker", "batch", "etl", claimRes(nvidiaDriver, "node1", tc.batch, ""))),
				pod("serve", "llm-0", claimed("server", "serve", "llm-mig", claimRes(nvidiaDriver, "node1", tc.infer, ""))),
			}}
			f := &fakeSlices{initial: loadSlices(t, tc.file)}
			a := startDRA(t, claims, &ResourceSlicesConfig{NodeName: "node1"}, f, zap.New(core), map[string]int{gpuMIG: 0, gpuTrain: 1})
			setMIGs(a, draMIGs)
			const remade = "MIG-0d2f4b6d-8f0b-5d2f-a4b6-d8f0b2d4f6a8"
			a.SetMIG(remade, MIGPlacement{0, 19, 0}) // migBatch's placement, another uuid
			require.Eventually(t, func() bool { return a.Allocated(migBatch) }, 5*time.Second, time.Millisecond)
			assert.Equal(t, []Owner{{PodName: "etl-1", Namespace: "batch", ContainerName: "worker", ClaimName: "etl"}}, a.Holders(migBatch))
			assert.Equal(t, []Owner{{PodName: "llm-0", Namespace: "serve", ContainerName: "server", ClaimName: "llm-mig"}}, a.Holders(migInfer))
			assert.False(t, a.Allocated(remade), "the slice names another uuid at that placement")
			time.Sleep(60 * time.Millisecond)
			assert.Zero(t, logs.Len(), "%v", logs.All())
		})
	}
}

// Without the slices, a claimed MIG device is matched on the placement its
// name holds, under both forms.
func TestDRAFallbackMIGNames(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	claims := &podresourcesv1.ListPodResourcesResponse{PodResources: []*podresourcesv1.PodResources{
		pod("serve", "small-0", claimed("server", "serve", "small", claimRes(nvidiaDriver, "node1", "gpu-0-mig-1g18gb-19-3", ""))),
		pod("media", "enc-0", claimed("enc", "media", "enc", claimRes(nvidiaDriver, "node1", "gpu-1-mig-1g18gb-me-20-0", ""))),
		pod("serve", "big-0", claimed("server", "serve", "big", claimRes(nvidiaDriver, "node1", "gpu-1-mig-9-4-4", ""))), // up to v25.8
		pod("serve", "small-1", claimed("server", "serve", "small-1", claimRes(nvidiaDriver, "node1", "gpu-1-mig-19-3-1", ""))),
		pod("odd", "odd-0", claimed("odd", "odd", "odd", claimRes(nvidiaDriver, "node1", "gpu-0-mig-custom", ""))),
		pod("net", "nic-0", claimed("app", "net", "rdma", claimRes("rdma.example.com", "node1", "gpu-0-mig-1g18gb-19-4", ""))),
	}}
	for _, slices := range []*ResourceSlicesConfig{nil, {}} { // not configured; configured, unreadable (no node name)
		a := startDRA(t, claims, slices, nil, zap.New(core), map[string]int{gpuMIG: 0, gpuTrain: 1})
		setMIGs(a, dynMIGs)
		require.Eventually(t, func() bool { return a.Allocated(dynMIGa) }, 5*time.Second, time.Millisecond)
		assert.Equal(t, "small", a.Holders(dynMIGa)[0].ClaimName)
		assert.Equal(t, "enc", a.Holders(dynMIGc)[0].ClaimName)
		assert.Equal(t, "big", a.Holders(dynMIGb)[0].ClaimName, "the v25.8 form: profile 9, start 4, size 4")
		assert.Equal(t, []string{"small-1"}, claimNamesOf(a.Holders(dynMIGe)), "the v25.8 form: profile 19, start 3, size 1")
		assert.Equal(t, []string{"small"}, claimNamesOf(a.Holders(dynMIGa)), "the same placement on another GPU is another device")
		assert.False(t, a.Allocated(dynMIGd), "another driver's device of that name is not a GPU")
		assert.False(t, a.Allocated(gpuMIG), "the parent is not held by its MIG devices' claims")
	}
	time.Sleep(60 * time.Millisecond)
	odd := logs.FilterMessageSnippet("holds a MIG device")
	require.Equal(t, 1, odd.Len(), "only the name with no placement, once: %v", logs.All())
	assert.Equal(t, "gpu-0-mig-custom", odd.All()[0].ContextMap()["device"])
}

func claimNamesOf(owners []Owner) []string {
	var out []string
	for _, o := range owners {
		out = append(out, o.ClaimName)
	}
	return out
}

// An unprivileged collector cannot read the MIG devices' placements: where
// a claim names a MIG device, that is said once, whatever the MIG devices
// and scrapes.
func TestDRAMIGPlacementUnknownSaidOnce(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	a := startDRA(t, draAllocation(), nil, nil, zap.New(core), draMinors)
	for range 3 {
		a.MIGPlacementUnknown(migInfer)
		a.MIGPlacementUnknown(migBatch)
	}
	said := logs.FilterMessageSnippet("Cannot read a MIG device's GPU instance placement")
	require.Equal(t, 1, said.Len(), "%v", logs.All())
	assert.Equal(t, migInfer, said.All()[0].ContextMap()["mig_device"])

	core, logs = observer.New(zapcore.InfoLevel)
	b := startDRA(t, nodeAllocation(), nil, nil, zap.New(core), draMinors)
	b.MIGPlacementUnknown(migInfer)
	assert.Zero(t, logs.Len(), "no claim on a MIG device: nothing to say")
}
