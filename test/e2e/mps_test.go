//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
)

// CUDA MPS through a real Prometheus with the shipped rules
// (docs/design/waste.md, "MPS"): the simulated NVML shows MPS as an H200
// with driver 580 does (the compute list holds the server and the clients,
// the MPS list the clients, process utilization the server alone). The
// device plugin's MPS daemon pod runs the server, which sits on every GPU.
//   - GPU 0: two client pods (a, b), busy: each client's busy time is half
//     the GPU's, never a measured 0; the daemon pod holds nothing.
//   - GPU 1: one client pod (c) alone, busy: the GPU is its pod's.
//   - GPU 2: a client pod (d) beside a plain pod (e): the server's share
//     (60 %) is the client's, the plain process keeps its own (40 %).

const mpsServer = 810000

type mpsPod struct {
	name, uid, container string
	pid                  uint32
	gpu                  int // -1: the daemon, on every GPU
}

var mpsPods = []mpsPod{
	{"mps-control-daemon", "0a0a0a0a-0000-4000-8000-000000000000", strings.Repeat("0a", 32), mpsServer, -1},
	{"client-a", "0a0a0a0a-0000-4000-8000-00000000000a", strings.Repeat("aa", 32), 810001, 0},
	{"client-b", "0a0a0a0a-0000-4000-8000-00000000000b", strings.Repeat("bb", 32), 810002, 0},
	{"client-c", "0a0a0a0a-0000-4000-8000-00000000000c", strings.Repeat("cc", 32), 810011, 1},
	{"client-d", "0a0a0a0a-0000-4000-8000-00000000000d", strings.Repeat("dd", 32), 810021, 2},
	{"plain-e", "0a0a0a0a-0000-4000-8000-00000000000e", strings.Repeat("ee", 32), 810022, 2},
}

func mpsGPU(i int) string { return fmt.Sprintf("GPU-e2emps00-0000-4000-8000-00000000000%d", i) }

func TestMPS(t *testing.T) {
	t.Parallel()
	rules, err := filepath.Abs(filepath.Join("..", "..", "deploy", "prometheus", "rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var hp []holderProcess
	for _, p := range mpsPods {
		hp = append(hp, holderProcess{pid: p.pid, uid: 1000, cgroup: "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" +
			strings.ReplaceAll(p.uid, "-", "_") + ".slice/cri-containerd-" + p.container + ".scope\n"})
	}
	procRoot, cgroupRoot := writeHolderProcs(t, hp, "root:x:0:0:root:/root:/bin/bash\nml:x:1000:1000::/home/ml:/bin/bash\n")
	if err := os.WriteFile(filepath.Join(procRoot, fmt.Sprint(mpsServer), "comm"), []byte("nvidia-cuda-mps-server\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The device plugin allocates each GPU's MPS replicas to the client
	// pods (and the plain pod); the daemon pod gets none.
	kubelet := &podresourcesv1.ListPodResourcesResponse{}
	s := Scenario{Comment: "e2e: CUDA MPS, the device plugin's daemon and its clients", DriverVersion: driverVersion}
	serverSM := []float64{90, 90, 60}
	for i := 0; i < 3; i++ {
		procs := []Process{{PID: mpsServer, Name: "nvidia-cuda-mps-server", UsedMemoryBytes: 66 << 20, Type: "compute", MPS: "server", SMPercent: serverSM[i]}}
		for _, p := range mpsPods {
			if p.gpu != i {
				continue
			}
			proc := Process{PID: p.pid, Name: "python3", UsedMemoryBytes: uint64(p.pid-810000) << 20, Type: "compute", MPS: "client",
				SMPercent: 77} // a client's sm_percent never shows: NVML samples the server
			if strings.HasPrefix(p.name, "plain") {
				proc.MPS, proc.SMPercent = "", 40
			}
			procs = append(procs, proc)
			kubelet.PodResources = append(kubelet.PodResources, &podresourcesv1.PodResources{Name: p.name, Namespace: "ml",
				Containers: []*podresourcesv1.ContainerResources{{Name: "main",
					Devices: []*podresourcesv1.ContainerDevices{{ResourceName: "nvidia.com/gpu", DeviceIds: []string{mpsGPU(i) + "::0"}}}}}})
		}
		s.GPUs = append(s.GPUs, holderGPU(mpsGPU(i), i, 0.5, procs))
	}
	col := startCollector(t, "otelcol-nvml-mps", s.write(t), nil, receiverSettings+fmt.Sprintf(`processes:
  enabled: true
  proc_root: %s
  cgroup_root: %s
kubernetes:
  enabled: true
  pod_resources_socket: %s
  refresh_interval: 1s
`, procRoot, cgroupRoot, servePodResources(t, kubelet)))
	prom := startPrometheusScraping(t, col.promAddr, "", rules)
	holders := `gpu_holder:nvidia_gpu_diagnosis_candidate:5m`
	// The span starts once every figure it reads has a series: the pod
	// records may come an evaluation after the holders'.
	waitFor(t, 60*time.Second, "every client's holder figures and client-c's pod's in Prometheus", func() bool {
		return len(prom.tryQuery(holders)) >= 5 &&
			len(prom.tryQuery(`{__name__=~"namespace_pod:nvidia_gpu_(held|busy)_hours:1h", k8s_pod_name="client-c"}`)) == 2
	}, col.proc, prom.proc)
	sp := newSpan(t, prom, col.proc)

	ctr := func(p mpsPod) string { return fmt.Sprintf(`container_id=%q`, p.container) }
	daemon := mpsPods[0]
	// The server: its memory is its own, on every GPU, marked; it holds
	// nothing and is no holder.
	sp.is(t, `count(nvidia_gpu_process_memory_usage_bytes{nvidia_gpu_process_mps="server", `+ctr(daemon)+`})`, 1, 3, 0)
	sp.is(t, `sum(nvidia_gpu_process_memory_usage_bytes{nvidia_gpu_process_mps="server"})`, 1, 3*66<<20, 0)
	for _, q := range []string{"nvidia_gpu_process_held_time_seconds_total", "nvidia_gpu_process_busy_time_seconds_total",
		"nvidia_gpu_process_idle_time_seconds_total", holders, "gpu_holder:nvidia_gpu_held:5m"} {
		if res := prom.tryQuery(q + `{` + ctr(daemon) + `}`); len(res) > 0 {
			t.Errorf("the MPS daemon pod holds nothing, but %s has %s", q, seriesString(res))
		}
	}
	// Every GPU is MPS-shared, and busy its whole time.
	for i := 0; i < 3; i++ {
		gpu := fmt.Sprintf(`hw_id=%q`, mpsGPU(i))
		sp.is(t, `count(nvidia_gpu_held_time_seconds_total{`+gpu+`, nvidia_gpu_sharing="mps"})`, 1, 1, 0)
		sp.grew(t, mpsGPU(i)+" busy", `nvidia_gpu_busy_time_seconds_total{`+gpu+`}`, 1, 1, 1)
	}
	// Each holder's busy time: the clients' part is an even split of the
	// server's share, the plain process's its own; never a measured 0.
	for _, c := range []struct {
		pod  mpsPod
		busy float64
	}{{mpsPods[1], 0.5}, {mpsPods[2], 0.5}, {mpsPods[3], 1}, {mpsPods[4], 0.6}, {mpsPods[5], 0.4}} {
		gpu := fmt.Sprintf(`hw_id=%q, %s`, mpsGPU(c.pod.gpu), ctr(c.pod))
		sp.grew(t, c.pod.name+" held", `nvidia_gpu_process_held_time_seconds_total{`+gpu+`}`, 1, 1, 1)
		sp.grew(t, c.pod.name+" busy", `nvidia_gpu_process_busy_time_seconds_total{`+gpu+`}`, 1, c.busy, 1)
		role := "client"
		if strings.HasPrefix(c.pod.name, "plain") {
			role = ""
		}
		sp.is(t, `count(nvidia_gpu_process_held_time_seconds_total{`+gpu+fmt.Sprintf(`, nvidia_gpu_process_mps=%q})`, role), 1, 1, 0)
		util := `nvidia_gpu_process_utilization_ratio{` + gpu + `, hw_gpu_task="general"}`
		if role == "client" {
			if res := prom.tryQuery(util); len(res) > 0 {
				t.Errorf("%s: a client's utilization is not observable, but reads %s", c.pod.name, seriesString(res))
			}
		} else {
			sp.is(t, util, 1, 0.4, 0.011)
		}
		// A holder of the diagnosis, reading the GPU's activity (SM 0.5).
		sp.is(t, `gpu_holder:nvidia_gpu_activity:5m{`+ctr(c.pod)+`}`, 1, 0.5, 0.02)
	}
	// The lone client's pod owns its GPU: the rules name it by pod.
	sp.grew(t, "client-c's pod busy", `namespace_pod:nvidia_gpu_busy_hours:1h{k8s_pod_name="client-c"}`, 3600, 1, 1)
	sp.grew(t, "client-c's pod held", `namespace_pod:nvidia_gpu_held_hours:1h{k8s_pod_name="client-c"}`, 3600, 1, 1)
	if res := prom.tryQuery(`{__name__=~"namespace_pod:nvidia_gpu_.*", k8s_pod_name="mps-control-daemon"}`); len(res) > 0 {
		t.Errorf("the MPS daemon pod has figures: %s", seriesString(res))
	}
}
