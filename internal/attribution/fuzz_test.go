package attribution

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
)

// checkOwnerShape fails unless o is what a cgroup can give: a 64-hex
// container id or none, a canonical pod UID or none, and no names.
func checkOwnerShape(t *testing.T, o Owner) {
	t.Helper()
	if o.ContainerID != "" && (len(o.ContainerID) != 64 || !isLowerHex(o.ContainerID)) {
		t.Fatalf("bad container id %q", o.ContainerID)
	}
	if o.PodUID != "" {
		if strings.Contains(o.PodUID, "_") {
			t.Fatalf("pod UID %q keeps underscores", o.PodUID)
		}
		if got, ok := normalizeUID(o.PodUID); !ok || got != o.PodUID {
			t.Fatalf("bad pod UID %q", o.PodUID)
		}
	}
	if o.SlurmJobID != "" && !isSlurmJobID(o.SlurmJobID) {
		t.Fatalf("bad Slurm job id %q", o.SlurmJobID)
	}
	if o.SlurmStep != "" && (o.SlurmJobID == "" || !isSlurmStep(o.SlurmStep)) {
		t.Fatalf("bad Slurm step %q of job %q", o.SlurmStep, o.SlurmJobID)
	}
	if o.PodName != "" || o.Namespace != "" || o.ContainerName != "" {
		t.Fatalf("a cgroup gave names: %+v", o)
	}
}

func cgroupSeeds(f *testing.F) [][]byte {
	files, err := filepath.Glob(filepath.Join("testdata", "cgroup", "*.txt"))
	if err != nil || len(files) == 0 {
		f.Fatalf("no seeds: %v", err)
	}
	var seeds [][]byte
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		seeds = append(seeds, data)
	}
	return seeds
}

// FuzzParseCgroup: any bytes as a /proc/<pid>/cgroup file.
func FuzzParseCgroup(f *testing.F) {
	for _, s := range cgroupSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		o, err := parseCgroup(bytes.NewReader(data))
		if err != nil {
			if !o.IsZero() {
				t.Fatalf("an error with an owner: %+v", o)
			}
			return
		}
		checkOwnerShape(t, o)
	})
}

// FuzzParseCgroupPath: any string as one cgroup path.
func FuzzParseCgroupPath(f *testing.F) {
	for _, s := range cgroupSeeds(f) {
		for _, line := range strings.Split(string(s), "\n") {
			if parts := strings.SplitN(line, ":", 3); len(parts) == 3 {
				f.Add(parts[2])
			}
		}
	}
	f.Add("/kubepods/pod" + uidCgroupfs + "/" + idCgroupfs)
	f.Add("kubepods-pod" + strings.Repeat("_", 36) + ".slice")
	f.Add(":::-pod::-::.scope.slice")
	f.Fuzz(func(t *testing.T, path string) {
		o := parseCgroupPath(path)
		checkOwnerShape(t, o)
		if o.ContainerID != "" && !strings.Contains(path, o.ContainerID) {
			t.Fatalf("container id %q not in %q", o.ContainerID, path)
		}
	})
}

// FuzzParseSlurmPath: any string as one cgroup path, for its Slurm job.
func FuzzParseSlurmPath(f *testing.F) {
	for _, s := range cgroupSeeds(f) {
		for _, line := range strings.Split(string(s), "\n") {
			if parts := strings.SplitN(line, ":", 3); len(parts) == 3 {
				f.Add(parts[2])
			}
		}
	}
	f.Add("/slurm_x/uid_1/job_4294967295/step_interactive")
	f.Add("/slurmstepd.scope/job_1/step_")
	f.Fuzz(func(t *testing.T, path string) {
		job, step, ok := parseSlurmPath(path)
		if !ok {
			if job != "" || step != "" {
				t.Fatalf("no job, yet %q %q", job, step)
			}
			return
		}
		if !isSlurmJobID(job) || !strings.Contains(path, "/job_"+job) {
			t.Fatalf("job %q from %q", job, path)
		}
		if step != "" && (!isSlurmStep(step) || !strings.Contains(path, "/job_"+job+"/step_"+step)) {
			t.Fatalf("step %q from %q", step, path)
		}
	})
}

// procStatus is the head of a /proc/<pid>/status file as Linux 6.x writes
// it, for a process in a container's PID namespace seen from the host.
const procStatus = "Name:\tpython3.12\nUmask:\t0022\nState:\tS (sleeping)\nTgid:\t4242\nNgid:\t0\nPid:\t4242\nPPid:\t4200\n" +
	"TracerPid:\t0\nUid:\t1000\t1000\t1000\t1000\nGid:\t1000\t1000\t1000\t1000\nFDSize:\t256\nGroups:\t \n" +
	"NStgid:\t4242\t1\nNSpid:\t4242\t1\nNSpgid:\t4242\t1\nNSsid:\t4242\t1\nKthread:\t0\nVmPeak:\t  123456 kB\n"

// FuzzSelfNSpid: any bytes as <proc root>/self/status (selfNSpid less the
// open).
func FuzzSelfNSpid(f *testing.F) {
	f.Add([]byte(procStatus))
	f.Add([]byte(strings.Replace(procStatus, "NSpid:\t4242\t1\n", "NSpid:\t4242\n", 1))) // the host's own
	f.Add([]byte(strings.Replace(procStatus, "NSpid:\t4242\t1\n", "NSpid:\t4242\t310\t1\n", 1)))
	f.Add([]byte(strings.Replace(procStatus, "NSpid:\t4242\t1\n", "", 1))) // Linux < 4.1
	f.Add([]byte("NSpid:\n"))
	f.Add([]byte("Name:\tx\r\nNSpid:\t7\r\n"))
	f.Add([]byte("NSpid:" + strings.Repeat(" 1", 40000))) // a line past the scanner's buffer
	if data, err := os.ReadFile("/proc/self/status"); err == nil {
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		nspids, err := parseNSpid(bytes.NewReader(data))
		if err != nil {
			if nspids != nil {
				t.Fatalf("an error with NSpids %q", nspids)
			}
			return
		}
		if !bytes.Contains(data, []byte("NSpid:")) {
			t.Fatalf("NSpids %q without an NSpid line", nspids)
		}
		for _, pid := range nspids {
			if pid == "" || strings.ContainsAny(pid, " \t\n\r\v\f") {
				t.Fatalf("bad NSpid field %q in %q", pid, nspids)
			}
		}
	})
}

// FuzzReplicaBase: any string as a device id.
func FuzzReplicaBase(f *testing.F) {
	for _, id := range []string{
		"GPU-5e5a3c16-7d0e-4ab5-9f0c-2f6e3b1a8c41::0", "GPU-5e5a3c16-7d0e-4ab5-9f0c-2f6e3b1a8c41::12",
		"GPU-5e5a3c16-7d0e-4ab5-9f0c-2f6e3b1a8c41", "MIG-1f2d4b6a-8c0e-5a7b-9d1f-3e5a7c9b1d2f::3",
		"0::3", "nvidia0/vgpu1", "1:0", "::1", "a::", "a::::1", "a::1::2", "a::-1", "a::١",
	} {
		f.Add(id)
	}
	f.Fuzz(func(t *testing.T, id string) {
		base, ok := replicaBase(id)
		if !ok {
			if base != "" {
				t.Fatalf("%q: base %q without ok", id, base)
			}
			return
		}
		n, found := strings.CutPrefix(id, base+"::")
		if base == "" || !found || n == "" || strings.Contains(n, "::") {
			t.Fatalf("%q: base %q", id, base)
		}
		for _, c := range n {
			if c < '0' || c > '9' {
				t.Fatalf("%q: replica %q", id, n)
			}
		}
	})
}

// FuzzBuildSnapshot: any pod, container, resource and device ids (split at
// ",") in a List answer beside a real-looking node's.
func FuzzBuildSnapshot(f *testing.F) {
	f.Add("ml", "trainer-0", "trainer", "nvidia.com/gpu", gpuTrain)
	f.Add("dev", "notebook-a", "jupyter", "nvidia.com/gpu", gpuSliced+"::0,"+gpuSliced+"::1")
	f.Add("dev", "notebook-c", "jupyter", "nvidia.com/gpu.shared", gpuShared+"::3,"+gpuShared+"::4")
	f.Add("serve", "llm-0", "server", "nvidia.com/mig-3g.71gb", migInfer)
	f.Add("ml", "trainer-1", "trainer", "nvidia.com/gpu", "nvidia0,nvidia1")      // GKE
	f.Add("ml", "trainer-2", "trainer", "nvidia.com/gpu", "nvidia0/vgpu0")        // GKE, time-shared
	f.Add("ml", "trainer-3", "trainer", "nvidia.com/gpu", "0,1")                  // DEVICE_ID_STRATEGY=index
	f.Add("batch", "etl-1", "worker", "nvidia.com/mig-1g.18gb", "1:0")            // index, MIG
	f.Add("kube-system", "fpga-user", "app", "example.com/fpga", "fpga-0,fpga-1") // another vendor's
	f.Add("", "", "", "nvidia.com/gpu", ",::1,a::,GPU-::0,,")
	prefixes := DefaultResourcePrefixes()
	f.Fuzz(func(t *testing.T, ns, name, ctrName, resource, idList string) {
		ids := strings.Split(idList, ",")
		resp := nodeAllocation()
		resp.PodResources = append(resp.PodResources, pod(ns, name, ctr(ctrName, dev(resource, ids...))))
		s := buildSnapshot(resp, prefixes)
		fuzzed := Owner{PodName: name, Namespace: ns, ContainerName: ctrName}

		// What byID may hold: the ids listed, and their replicas' bases.
		allowed := map[string]bool{}
		for _, p := range resp.GetPodResources() {
			for _, c := range p.GetContainers() {
				for _, d := range c.GetDevices() {
					if !hasAnyPrefix(d.GetResourceName(), prefixes) {
						continue
					}
					for _, id := range d.GetDeviceIds() {
						allowed[id] = true
						if base, ok := replicaBase(id); ok {
							allowed[base] = true
						}
					}
				}
			}
		}
		for id, owners := range s.byID {
			if id == "" || len(owners) == 0 || !allowed[id] {
				t.Fatalf("entry %q: %v", id, owners)
			}
			for i := range owners {
				for j := range i {
					if owners[i] == owners[j] {
						t.Fatalf("%q: %+v twice", id, owners[i])
					}
				}
			}
		}
		anyUUID := false
		for _, id := range ids {
			if id == "" || !hasAnyPrefix(resource, prefixes) {
				continue
			}
			anyUUID = anyUUID || isNVMLUUID(id)
			found := false
			for _, o := range s.byID[id] {
				found = found || o == fuzzed
			}
			if !found {
				t.Fatalf("device %q of %q not found under its id", id, resource)
			}
		}
		// nodeAllocation lists UUIDs: a node with one never says otherwise.
		if s.notUUIDs.cause != "" || len(s.notUUIDs.ids) > maxNonUUIDIDs || len(s.notUUIDs.resources) > maxNonUUIDShapes {
			t.Fatalf("%+v beside UUIDs", s.notUUIDs)
		}
		// Alone, the fuzzed pod's ids are named by index when none is a UUID.
		alone := buildSnapshot(&podresourcesv1.ListPodResourcesResponse{PodResources: resp.PodResources[len(resp.PodResources)-1:]}, prefixes)
		listed := len(alone.byID) > 0
		if got, want := alone.notUUIDs.cause != "", listed && !anyUUID; got != want {
			t.Fatalf("ids %q: notUUIDs %+v, want a cause: %v", ids, alone.notUUIDs, want)
		}
		if len(alone.notUUIDs.ids) > maxNonUUIDIDs || len(alone.notUUIDs.resources) > maxNonUUIDShapes ||
			strings.Count(alone.notUUIDs.cause, ",") >= maxNonUUIDShapes {
			t.Fatalf("unbounded: %+v", alone.notUUIDs)
		}
	})
}
