//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/otelcol-nvml/otelcol-nvml/test/testutil"
)

// The DRA scenario's GPUs: GPU 0 in MIG mode with two 1g.18gb MIG devices
// (GPU instance profile 19) at placements 0 and 3, GPUs 1 to 3 whole.
// Nothing runs on any of them: every held second is the claims'. NVIDIA's
// DRA driver names a MIG device gpu-<parent minor>-mig-<profile>-<profile
// id>-<placement start>; the slice lists the first with its uuid, as with
// static MIG, and the second without, as a MIG device made on demand
// (dynamic MIG), which never gets one.
const (
	draNode       = "node1"
	draDriver     = "gpu.nvidia.com"
	draMIGName    = "gpu-0-mig-1g18gb-19-0"
	draMIG        = "MIG-e2edra00-0000-4000-8000-0000000000a0"
	draDynMIGName = "gpu-0-mig-1g18gb-19-3"
	draDynMIG     = "MIG-e2edra00-0000-4000-8000-0000000000a1"
)

func draGPU(i int) string { return fmt.Sprintf("GPU-e2edra00-0000-4000-8000-00000000000%d", i) }

func draScenario() Scenario {
	s := Scenario{Comment: "e2e: GPUs allocated through DRA claims, with no process", DriverVersion: driverVersion}
	for i := 0; i < 4; i++ {
		g := GPU{
			Name: "NVIDIA H200 (SIMULATED)", UUID: draGPU(i), Serial: fmt.Sprintf("SIMULATED-DRA-%d", i),
			PCIBusID:     fmt.Sprintf("00000000:%02X:00.0", 0x19+i),
			Utilization:  &Utilization{GPU: &Duty{Busy: 0}, Memory: &Duty{Busy: 0}},
			Memory:       &Memory{TotalBytes: 150754820096, ReservedBytes: 617086976, UsedBytes: 0},
			TemperatureC: 30, PowerW: 75, PowerLimitW: 700, PState: 0,
			Processes: []Process{},
			GPM:       map[string]Signal{"SM_UTIL": 0, "SM_OCCUPANCY": 0, "DRAM_BW_UTIL": 0},
			MIG:       &MIG{Enabled: ptr(false), Profiles: h200Profiles},
		}
		if i == 0 {
			g.Utilization = nil
			g.MIG = &MIG{MaxDevices: 7, Profiles: h200Profiles,
				GPUInstances: []GPUInstance{
					{ID: 9, ProfileID: 19, PlacementStart: ptr(0), Memory: &Memory{TotalBytes: 18432 << 20}, GPM: map[string]Signal{"SM_UTIL": 0}},
					{ID: 10, ProfileID: 19, PlacementStart: ptr(3), Memory: &Memory{TotalBytes: 18432 << 20}, GPM: map[string]Signal{"SM_UTIL": 0}},
				},
				Devices: []MIGDevice{{UUID: draMIG, GPUInstanceID: 9, ComputeInstanceID: 0}, {UUID: draDynMIG, GPUInstanceID: 10, ComputeInstanceID: 0}}}
		}
		s.GPUs = append(s.GPUs, g)
	}
	return s
}

// draPod is a pod whose one container holds a claim on one device.
func draPod(ns, name, claim, device string, shareID *string) *podresourcesv1.PodResources {
	return &podresourcesv1.PodResources{Namespace: ns, Name: name, Containers: []*podresourcesv1.ContainerResources{{
		Name: "main",
		DynamicResources: []*podresourcesv1.DynamicResource{{ClaimName: claim, ClaimNamespace: ns,
			ClaimResources: []*podresourcesv1.ClaimResource{{DriverName: draDriver, PoolName: draNode, DeviceName: device, ShareId: shareID}}}},
	}}}
}

// draKubelet: a notebook's claim on gpu-2; a claim on each MIG device; one
// claim shared by two pods (one through a share_id) on gpu-3; a claim on
// gpu-1, which no slice lists until the test creates one; and a claim of
// another driver on the same name gpu-2, which must count nowhere.
func draKubelet() *podresourcesv1.ListPodResourcesResponse {
	other := draPod("net", "nic-0", "rdma", "gpu-2", nil)
	other.Containers[0].DynamicResources[0].ClaimResources[0].DriverName = "rdma.example.com"
	return &podresourcesv1.ListPodResourcesResponse{PodResources: []*podresourcesv1.PodResources{
		draPod("ml", "notebook-0", "notebook-gpu", "gpu-2", nil),
		draPod("serve", "llm-0", "llm-mig", draMIGName, nil),
		draPod("serve", "small-0", "small-mig", draDynMIGName, nil),
		draPod("team", "a-0", "shared-gpu", "gpu-3", nil),
		draPod("team", "b-0", "shared-gpu", "gpu-3", ptr("5f0c6a2e-0000-4000-8000-000000000001")),
		draPod("spare", "spare-0", "spare-gpu", "gpu-1", nil),
		other,
	}}
}

// draSlice is a ResourceSlice of the node's pool, each device with its uuid
// ("" for none); a MIG device (named so) with its type and parent, as
// NVIDIA's driver lists it.
func draSlice(name string, devices map[string]string) *resourceapi.ResourceSlice {
	node := draNode
	s := &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: resourceapi.ResourceSliceSpec{Driver: draDriver, NodeName: &node,
			Pool: resourceapi.ResourcePool{Name: draNode, ResourceSliceCount: 2}}}
	for dev, uuid := range devices {
		d := resourceapi.Device{Name: dev, Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
			"productName": {StringValue: ptr("NVIDIA H200")}}}
		if uuid != "" {
			d.Attributes["uuid"] = resourceapi.DeviceAttribute{StringValue: ptr(uuid)}
		}
		if strings.HasPrefix(dev, "gpu-0-mig-") {
			d.Attributes["type"] = resourceapi.DeviceAttribute{StringValue: ptr("mig")}
			d.Attributes["parentUUID"] = resourceapi.DeviceAttribute{StringValue: ptr(draGPU(0))}
		}
		s.Spec.Devices = append(s.Spec.Devices, d)
	}
	return s
}

// draDevices is the node's devices: those given, and GPU 0's MIG devices:
// draMIG with its uuid, and every other 1g.18gb, 3g.71gb and 7g.141gb
// placement without one, as dynamic MIG lists them (draDynMIG among them).
func draDevices(whole map[string]string) map[string]string {
	out := map[string]string{draMIGName: draMIG, "gpu-0-mig-3g71gb-9-0": "", "gpu-0-mig-3g71gb-9-4": "", "gpu-0-mig-7g141gb-0-0": ""}
	for start := 1; start < 7; start++ {
		out[fmt.Sprintf("gpu-0-mig-1g18gb-19-%d", start)] = ""
	}
	for name, uuid := range whole {
		out[name] = uuid
	}
	return out
}

// heldBy returns the last point of a device's metric on the resource of
// owner (pod and claim; "" for an owner-less resource), and whether any.
func heldBy(pts []point, uuid, metric, pod, claim string) (point, bool) {
	var last point
	ok := false
	for _, p := range filter(pts, uuid, metric, nil) {
		if _, isProc := p.Resource["process.pid"]; isProc {
			continue
		}
		gotPod, _ := p.Resource["k8s.pod.name"].(string)
		gotClaim, _ := p.Resource["k8s.resourceclaim.name"].(string)
		if gotPod != pod || gotClaim != claim {
			continue
		}
		if !ok || p.Time.After(last.Time) {
			last, ok = p, true
		}
	}
	return last, ok
}

// growth is how much a device's counter on one owner's resource grew over
// the last span of the run, and the span: from its first point at or after
// from to its last.
func growth(pts []point, uuid, metric, pod, claim string, from time.Time) (grew, span float64, ok bool) {
	var first, last point
	n := 0
	for _, p := range filter(pts, uuid, metric, nil) {
		if _, isProc := p.Resource["process.pid"]; isProc || p.Time.Before(from) {
			continue
		}
		gotPod, _ := p.Resource["k8s.pod.name"].(string)
		gotClaim, _ := p.Resource["k8s.resourceclaim.name"].(string)
		if gotPod != pod || gotClaim != claim {
			continue
		}
		if n == 0 || p.Time.Before(first.Time) {
			first = p
		}
		if n == 0 || p.Time.After(last.Time) {
			last = p
		}
		n++
	}
	return last.Value - first.Value, last.Time.Sub(first.Time).Seconds(), n >= 2
}

// draSettings is the receiver's settings for a DRA node: PodResources on
// sock, the node's ResourceSlices read with kubeconfig.
func draSettings(sock, node, kubeconfig string) string {
	return receiverSettings + fmt.Sprintf(`kubernetes:
  enabled: true
  pod_resources_socket: %s
  refresh_interval: 1s
  node_name: %s
  dra:
    resource_slices:
      kubeconfig: %s
`, sock, node, kubeconfig)
}

// TestDRA runs the DRA scenarios against a real kube-apiserver and etcd,
// with the kubelet's PodResources serving dynamic_resources:
//
//  1. a claim holding GPU 2 with no process: held and idle, with pod and claim;
//  2. a claim on a MIG device listed with its uuid, and one on a MIG device
//     made on demand, listed without (dynamic MIG);
//  3. one claim shared by two pods: held once, owner-less;
//  4. the ResourceSlices unreadable (a collector whose user has no RBAC
//     rule): the fallback (gpu-<minor>, and MIG device names by their
//     placement), said once;
//  6. a namespace with a GPU quota of 4 holding 3 GPUs through claims on
//     another node, 1 active, through Prometheus and the quota rules
//     (holders_test.go; scenario 5, Slurm, is TestSlurmHolders).
//
// And a slice created, changed (a device losing its uuid) and deleted while
// the collector runs; a claim naming a device that no slice has.
func TestDRA(t *testing.T) {
	t.Parallel()
	api := startKubeAPI(t)
	slices := api.resourceClient(t).ResourceSlices()
	ctx := context.Background()
	base := draSlice("node1-gpus", draDevices(map[string]string{"gpu-2": draGPU(2), "gpu-3": draGPU(3)}))
	created, err := slices.Create(ctx, base, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating the node's ResourceSlice: %v", err)
	}
	quota := startQuotaScenario(t, api)

	bin := testutil.AbsFlag(t, "otelcol", *otelcolPath)
	be := startBackend(t, bin)
	sock := servePodResources(t, draKubelet())
	scenario := draScenario().write(t)
	kube := func(kubeconfig string) string { return draSettings(sock, draNode, kubeconfig) }
	col := startCollector(t, "otelcol-nvml", scenario, be, kube(api.kubeconfig(t, "admin", adminToken)))
	fallbackBE := startBackend(t, bin)
	fallback := startCollector(t, "otelcol-nvml-fallback", scenario, fallbackBE, kube(api.kubeconfig(t, "nobody", nobodyToken)))

	within := 1.5 // one collection interval (1 s), and the points' own spacing
	check := func(what string, grew, span float64, ok bool, want float64) {
		t.Helper()
		switch {
		case !ok:
			t.Errorf("%s: fewer than two points", what)
		case math.Abs(grew-want*span) > within:
			t.Errorf("%s: grew %.2f s over %.2f s, want %.2f", what, grew, span, want*span)
		}
	}
	waitFor(t, 60*time.Second, "GPU 2 held by the notebook's claim", func() bool {
		_, ok := heldBy(be.points(t), draGPU(2), "nvidia.gpu.held.time", "notebook-0", "notebook-gpu")
		return ok
	}, col.proc, be.proc)
	from := time.Now()
	time.Sleep(8 * time.Second)
	pts := be.points(t)

	// 1. Held and idle, every second, on the pod and the claim.
	g, span, ok := growth(pts, draGPU(2), "nvidia.gpu.held.time", "notebook-0", "notebook-gpu", from)
	check("GPU 2 held", g, span, ok, 1)
	g, span, ok = growth(pts, draGPU(2), "nvidia.gpu.idle.time", "notebook-0", "notebook-gpu", from)
	check("GPU 2 idle", g, span, ok, 1)
	// 2. The MIG device, held by its claim.
	g, span, ok = growth(pts, draMIG, "nvidia.gpu.held.time", "llm-0", "llm-mig", from)
	check("the MIG device held", g, span, ok, 1)
	g, span, ok = growth(pts, draDynMIG, "nvidia.gpu.held.time", "small-0", "small-mig", from)
	check("the MIG device made on demand held (by its placement: no uuid in the slice)", g, span, ok, 1)
	// 3. The shared claim: held once, on the GPU's owner-less resource.
	g, span, ok = growth(pts, draGPU(3), "nvidia.gpu.held.time", "", "", from)
	check("GPU 3 held (shared, once)", g, span, ok, 1)
	// ... and each of its holders listed, with half of it.
	for _, pod := range []string{"a-0", "b-0"} {
		if p, ok := heldBy(pts, draGPU(3), "nvidia.gpu.allocation", pod, "shared-gpu"); !ok || p.Value != 0.5 {
			t.Errorf("GPU 3's holder %s: nvidia.gpu.allocation %v (found: %v), want 0.5", pod, p.Value, ok)
		}
	}
	// gpu-1's claim names a device no slice has: free, and said once.
	g, span, ok = growth(pts, draGPU(1), "nvidia.gpu.held.time", "", "", from)
	check("GPU 1 held (its device is in no slice)", g, span, ok, 0)
	g, span, ok = growth(pts, draGPU(1), "nvidia.gpu.free.time", "", "", from)
	check("GPU 1 free", g, span, ok, 1)
	if n := logCount(col.proc.logs.String(), "no ResourceSlice of this node has", "gpu-1"); n != 1 {
		t.Errorf("the claim on a device that no slice has: logged %d times, want 1", n)
	}
	if n := logCount(col.proc.logs.String(), "rdma"); n != 0 {
		t.Errorf("another driver's claim is logged %d times", n)
	}

	// A slice created while it runs: gpu-1 is GPU 1.
	if _, err := slices.Create(ctx, draSlice("node1-gpu1", map[string]string{"gpu-1": draGPU(1)}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "GPU 1 held by the spare claim once its slice exists", func() bool {
		_, ok := heldBy(be.points(t), draGPU(1), "nvidia.gpu.held.time", "spare-0", "spare-gpu")
		return ok
	}, col.proc, be.proc)

	// Changed: gpu-2 loses its uuid (as a device not yet prepared): the
	// notebook's claim no longer names a GPU; said once.
	changed := draSlice("node1-gpus", draDevices(map[string]string{"gpu-2": "", "gpu-3": draGPU(3)}))
	changed.ResourceVersion = created.ResourceVersion
	if _, err := slices.Update(ctx, changed, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "GPU 2 free once its device has no uuid", func() bool {
		_, ok := heldBy(be.points(t), draGPU(2), "nvidia.gpu.free.time", "", "")
		return ok
	}, col.proc, be.proc)
	// Deleted: GPU 1 is free again.
	if err := slices.Delete(ctx, "node1-gpu1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	waitFor(t, 10*time.Second, "GPU 1 free once its slice is deleted", func() bool {
		p, ok := heldBy(be.points(t), draGPU(1), "nvidia.gpu.held.time", "", "")
		return ok && p.Time.After(deleted.Add(2*time.Second))
	}, col.proc, be.proc)
	time.Sleep(3 * time.Second)
	pts = be.points(t)
	g, span, ok = growth(pts, draGPU(1), "nvidia.gpu.held.time", "", "", deleted.Add(2*time.Second))
	check("GPU 1 held after its slice is deleted", g, span, ok, 0)
	if p, ok := heldBy(pts, draGPU(1), "nvidia.gpu.held.time", "spare-0", "spare-gpu"); ok && p.Time.After(deleted.Add(2*time.Second)) {
		t.Errorf("GPU 1 still on the spare claim at %s, after its slice was deleted", p.Time)
	}
	if n := logCount(col.proc.logs.String(), "without a uuid attribute", "gpu-2"); n != 1 {
		t.Errorf("the device without a uuid: logged %d times, want 1", n)
	}
	if n := logCount(col.proc.logs.String(), "without a uuid attribute"); n != 1 {
		t.Errorf("devices without a uuid: logged %d times, want 1 (gpu-2's): the MIG devices made on demand are matched by name", n)
	}
	if n := logCount(col.proc.logs.String(), "Cannot read the node's ResourceSlices"); n != 0 {
		t.Errorf("the admin's collector says %d times that it cannot read the slices", n)
	}

	// 4. The slices unreadable: the fallback, gpu-2 by GPU 2's minor
	// number, the MIG devices by their placements; said once.
	fpts := fallbackBE.points(t)
	g, span, ok = growth(fpts, draGPU(2), "nvidia.gpu.held.time", "notebook-0", "notebook-gpu", from)
	check("fallback: GPU 2 held", g, span, ok, 1)
	g, span, ok = growth(fpts, draGPU(2), "nvidia.gpu.idle.time", "notebook-0", "notebook-gpu", from)
	check("fallback: GPU 2 idle", g, span, ok, 1)
	g, span, ok = growth(fpts, draMIG, "nvidia.gpu.held.time", "llm-0", "llm-mig", from)
	check("fallback: the MIG device held", g, span, ok, 1)
	g, span, ok = growth(fpts, draDynMIG, "nvidia.gpu.held.time", "small-0", "small-mig", from)
	check("fallback: the MIG device made on demand held", g, span, ok, 1)
	logs := fallback.proc.logs.String()
	if n := logCount(logs, "Cannot read the node's ResourceSlices", "forbidden"); n != 1 {
		t.Errorf("fallback: the unreadable slices logged %d times, want 1:\n%s", n, logs)
	}
	if n := logCount(logs, "holds a MIG device"); n != 0 {
		t.Errorf("fallback: the MIG claims, matched by their placement, logged %d times", n)
	}
	for _, klog := range []string{"reflector.go", "Failed to watch"} {
		if n := logCount(logs, klog); n != 0 {
			t.Errorf("fallback: %d lines of client-go's own (%q): its retries must not log:\n%s", n, klog, logs)
		}
	}

	// 6. The quota scenario, run meanwhile on node2.
	quota.check(t)
}
