//go:build cgo

package nvmlreceiver

import (
	"fmt"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/otelcol-nvml/otelcol-nvml/test/nvmltest"
)

// claimedGPU is a PodResources answer: a DRA claim of NVIDIA's driver on
// each device name, each to its pod ("namespace", "name", "container",
// "claim").
func claimedGPU(devices map[string][4]string) *podresourcesv1.ListPodResourcesResponse {
	resp := &podresourcesv1.ListPodResourcesResponse{}
	for name, at := range devices {
		resp.PodResources = append(resp.PodResources, &podresourcesv1.PodResources{Namespace: at[0], Name: at[1],
			Containers: []*podresourcesv1.ContainerResources{{Name: at[2],
				DynamicResources: []*podresourcesv1.DynamicResource{{ClaimName: at[3], ClaimNamespace: at[0],
					ClaimResources: []*podresourcesv1.ClaimResource{{DriverName: "gpu.nvidia.com", PoolName: "node1", DeviceName: name}}}}}}})
	}
	return resp
}

// A GPU held by a DRA claim with no process on it: held and idle, with the
// pod and the claim on its series. The ResourceSlices are off, so the
// claim's gpu-<minor> is matched to the GPU's minor number (the fallback).
func TestDRAClaimWithoutProcessIsHeld(t *testing.T) {
	t.Parallel()
	m := nvmltest.NewH200()
	m.GPUs[2].GPMValues[nvml.GPM_METRIC_SM_UTIL] = 0 // nothing runs
	socket := serveKubelet(t, claimedGPU(map[string][4]string{"gpu-2": {"ml", "notebook-0", "jupyter", "notebook-gpu"}}))
	ts := newTestScraper(t, m, func(cfg *Config) {
		cfg.Kubernetes.Enabled = true
		cfg.Kubernetes.PodResourcesSocket = socket
		cfg.Kubernetes.DRA.ResourceSlices.Enabled = false
	})
	ts.start(t)
	uuid := nvmltest.UUID(2)
	require.Eventually(t, func() bool { ts.scrapeOK(t); return ts.reporter.owners.Allocated(uuid) },
		5*time.Second, 5*time.Millisecond, "the claim is listed and matched")
	ts.scrapeOK(t)
	ts.clock.Advance(10 * time.Second)
	md := ts.scrapeOK(t)
	attrs := gpuResourceAttrs(md, uuid)
	assert.Equal(t, "notebook-0", attrs["k8s.pod.name"])
	assert.Equal(t, "ml", attrs["k8s.namespace.name"])
	assert.Equal(t, "jupyter", attrs["k8s.container.name"])
	assert.Equal(t, "notebook-gpu", attrs["k8s.resourceclaim.name"])
	assert.InDelta(t, 10, sumPoint(t, md, uuid, 0, "nvidia.gpu.held.time").DoubleValue(), 1e-9)
	assert.InDelta(t, 10, sumPoint(t, md, uuid, 0, "nvidia.gpu.idle.time").DoubleValue(), 1e-9)
	other := gpuResourceAttrs(md, nvmltest.UUID(1))
	assert.NotContains(t, other, "k8s.resourceclaim.name")
	assert.Zero(t, sumPoint(t, md, nvmltest.UUID(1), 0, "nvidia.gpu.held.time").DoubleValue(), "no claim: free")
}

// One claim shared by two pods: the GPU's held time counted once, on its
// owner-less resource, and each holder listed by nvidia.gpu.allocation with
// half of it.
func TestDRASharedClaimListsEachHolder(t *testing.T) {
	t.Parallel()
	m := nvmltest.NewH200()
	resp := claimedGPU(map[string][4]string{"gpu-3": {"team", "a-0", "main", "shared-gpu"}})
	resp.PodResources = append(resp.PodResources, claimedGPU(map[string][4]string{"gpu-3": {"team", "b-0", "main", "shared-gpu"}}).PodResources...)
	socket := serveKubelet(t, resp)
	ts := newTestScraper(t, m, func(cfg *Config) {
		cfg.Kubernetes.Enabled = true
		cfg.Kubernetes.PodResourcesSocket = socket
		cfg.Kubernetes.DRA.ResourceSlices.Enabled = false
	})
	ts.start(t)
	uuid := nvmltest.UUID(3)
	require.Eventually(t, func() bool { return ts.reporter.owners.Allocated(uuid) }, 5*time.Second, 5*time.Millisecond)
	ts.scrapeOK(t)
	ts.clock.Advance(10 * time.Second)
	md := ts.scrapeOK(t)
	for i := 0; i < md.ResourceMetrics().Len(); i++ {
		rm := md.ResourceMetrics().At(i)
		attrs := rm.Resource().Attributes().AsRaw()
		ms := rm.ScopeMetrics().At(0).Metrics()
		for j := 0; j < ms.Len(); j++ {
			if ms.At(j).Name() == "nvidia.gpu.held.time" && attrs["hw.id"] == uuid {
				assert.NotContains(t, attrs, "k8s.pod.name", "two holders: no single owner on the held time")
			}
		}
	}
	assert.InDelta(t, 10, sumPoint(t, md, uuid, 0, "nvidia.gpu.held.time").DoubleValue(), 1e-9, "held once, not once per holder")
	shares := map[string]float64{}
	for i := 0; i < md.ResourceMetrics().Len(); i++ {
		rm := md.ResourceMetrics().At(i)
		attrs := rm.Resource().Attributes().AsRaw()
		ms := rm.ScopeMetrics().At(0).Metrics()
		for j := 0; j < ms.Len(); j++ {
			if ms.At(j).Name() == "nvidia.gpu.allocation" && attrs["hw.id"] == uuid {
				assert.Equal(t, "shared-gpu", attrs["k8s.resourceclaim.name"])
				shares[attrs["k8s.pod.name"].(string)] += ms.At(j).Gauge().DataPoints().At(0).DoubleValue()
			}
		}
	}
	assert.Equal(t, map[string]float64{"a-0": 0.5, "b-0": 0.5}, shares)
}

// A claim on a MIG device that NVIDIA's DRA driver made on demand: no
// slice ever names its uuid, and the claim names it by its parent's minor
// number, its GPU instance's profile id and placement start. It is matched
// to the MIG device NVML lists at that placement (here by the fallback,
// the ResourceSlices off), under the driver's names since v25.12 and up to
// v25.8.
func TestDRADynamicMIGClaimIsHeld(t *testing.T) {
	t.Parallel()
	m := nvmltest.NewH200()
	g := m.GPUs[2]
	migs := g.EnableMIGInstances(
		nvmltest.MIGInstance{Profile: nvml.GPU_INSTANCE_PROFILE_1_SLICE, ComputeInstances: 1, Placement: &nvml.GpuInstancePlacement{Start: 3, Size: 1}},
		nvmltest.MIGInstance{Profile: nvml.GPU_INSTANCE_PROFILE_1_SLICE, ComputeInstances: 1, Placement: &nvml.GpuInstancePlacement{Start: 5, Size: 1}},
		nvmltest.MIGInstance{Profile: nvml.GPU_INSTANCE_PROFILE_3_SLICE, ComputeInstances: 1, Placement: &nvml.GpuInstancePlacement{Start: 0, Size: 4}},
	)
	p1, _ := g.GetGpuInstanceProfileInfoFunc(nvml.GPU_INSTANCE_PROFILE_1_SLICE)
	p3, _ := g.GetGpuInstanceProfileInfoFunc(nvml.GPU_INSTANCE_PROFILE_3_SLICE)
	small := fmt.Sprintf("gpu-2-mig-1g18gb-%d-3", p1.Id) // since v25.12
	big := fmt.Sprintf("gpu-2-mig-%d-0-4", p3.Id)        // up to v25.8
	other := fmt.Sprintf("gpu-1-mig-1g18gb-%d-5", p1.Id) // the same placement on GPU 1, not in MIG mode
	socket := serveKubelet(t, claimedGPU(map[string][4]string{
		small: {"serve", "small-0", "server", "small"},
		big:   {"serve", "big-0", "server", "big"},
		other: {"serve", "other-0", "server", "other"},
	}))
	ts := newTestScraper(t, m, func(cfg *Config) {
		cfg.Kubernetes.Enabled = true
		cfg.Kubernetes.PodResourcesSocket = socket
		cfg.Kubernetes.DRA.ResourceSlices.Enabled = false
	})
	ts.start(t)
	require.Eventually(t, func() bool { ts.scrapeOK(t); return ts.reporter.owners.Allocated(migs[0].UUID) },
		5*time.Second, 5*time.Millisecond, "the claim is listed and matched")
	ts.scrapeOK(t)
	ts.clock.Advance(10 * time.Second)
	md := ts.scrapeOK(t)
	for _, tc := range []struct{ uuid, pod, claim string }{{migs[0].UUID, "small-0", "small"}, {migs[2].UUID, "big-0", "big"}} {
		attrs := gpuResourceAttrs(md, tc.uuid)
		assert.Equal(t, tc.pod, attrs["k8s.pod.name"], tc.uuid)
		assert.Equal(t, tc.claim, attrs["k8s.resourceclaim.name"], tc.uuid)
		assert.InDelta(t, 10, sumPoint(t, md, tc.uuid, 0, "nvidia.gpu.held.time").DoubleValue(), 1e-9, tc.uuid)
	}
	assert.NotContains(t, gpuResourceAttrs(md, migs[1].UUID), "k8s.resourceclaim.name", "start 5 on GPU 2 is not claimed")
	assert.Zero(t, sumPoint(t, md, migs[1].UUID, 0, "nvidia.gpu.held.time").DoubleValue())
}

// Unprivileged, the MIG devices' placements cannot be read: a claim on a
// MIG device made on demand is not attributed, and that is said once.
func TestDRADynamicMIGClaimUnprivileged(t *testing.T) {
	t.Parallel()
	m := nvmltest.NewH200()
	g := m.GPUs[2]
	migs := g.EnableMIGInstances(
		nvmltest.MIGInstance{Profile: nvml.GPU_INSTANCE_PROFILE_1_SLICE, ComputeInstances: 1, Placement: &nvml.GpuInstancePlacement{Start: 3, Size: 1}},
		nvmltest.MIGInstance{Profile: nvml.GPU_INSTANCE_PROFILE_1_SLICE, ComputeInstances: 1, Placement: &nvml.GpuInstancePlacement{Start: 5, Size: 1}},
	)
	p1, _ := g.GetGpuInstanceProfileInfoFunc(nvml.GPU_INSTANCE_PROFILE_1_SLICE)
	g.GetGpuInstanceByIdFunc = func(int) (nvml.GpuInstance, nvml.Return) { return nil, nvml.ERROR_NO_PERMISSION }
	socket := serveKubelet(t, claimedGPU(map[string][4]string{
		fmt.Sprintf("gpu-2-mig-1g18gb-%d-3", p1.Id): {"serve", "small-0", "server", "small"},
	}))
	ts := newTestScraper(t, m, func(cfg *Config) {
		cfg.Kubernetes.Enabled = true
		cfg.Kubernetes.PodResourcesSocket = socket
		cfg.Kubernetes.DRA.ResourceSlices.Enabled = false
	})
	ts.start(t)
	said := func() int {
		return ts.logs.FilterMessageSnippet("Cannot read a MIG device's GPU instance placement").Len()
	}
	require.Eventually(t, func() bool { ts.scrapeOK(t); return said() > 0 }, 5*time.Second, 5*time.Millisecond)
	for range 3 {
		ts.clock.Advance(10 * time.Second)
		ts.scrapeOK(t)
	}
	assert.Equal(t, 1, said(), "once")
	assert.False(t, ts.reporter.owners.Allocated(migs[0].UUID))
}
