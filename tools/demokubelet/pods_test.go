package main

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const (
	gpu0 = "GPU-5151a7ed-de30-4000-8000-000000000000"
	gpu1 = "GPU-5151a7ed-de30-4000-8000-000000000001"
	mig0 = "MIG-5151a7ed-de30-5000-8000-000000000000"
)

// validNode is a pods file with a whole GPU, a MIG device and a pod
// without devices.
const validNode = `{
  "comment": "two pods",
  "pods": [
    {"namespace": "ml", "name": "train-0", "uid": "7a41c0de-0000-4000-8000-000000000001",
     "containers": [
       {"name": "trainer", "id": "7a417a417a417a417a417a417a417a417a417a417a417a417a417a417a417a41",
        "devices": [{"resource": "nvidia.com/gpu", "ids": ["` + gpu0 + `"]}]},
       {"name": "logger"}
     ]},
    {"namespace": "serve", "name": "llm-0",
     "containers": [{"name": "server", "devices": [{"resource": "nvidia.com/mig-1g.18gb", "ids": ["` + mig0 + `"]}]}]}
  ],
  "allocatable": [
    {"resource": "nvidia.com/gpu", "ids": ["` + gpu0 + `", "` + gpu1 + `"]},
    {"resource": "nvidia.com/mig-1g.18gb", "ids": ["` + mig0 + `"]}
  ]
}`

func TestParseNode(t *testing.T) {
	n, err := ParseNode(strings.NewReader(validNode))
	require.NoError(t, err)
	assert.Equal(t, &Node{
		Comment: "two pods",
		Pods: []Pod{
			{Namespace: "ml", Name: "train-0", UID: "7a41c0de-0000-4000-8000-000000000001", Containers: []Container{
				{Name: "trainer", ID: "7a417a417a417a417a417a417a417a417a417a417a417a417a417a417a417a41",
					Devices: []Devices{{Resource: "nvidia.com/gpu", IDs: []string{gpu0}}}},
				{Name: "logger"},
			}},
			{Namespace: "serve", Name: "llm-0", Containers: []Container{
				{Name: "server", Devices: []Devices{{Resource: "nvidia.com/mig-1g.18gb", IDs: []string{mig0}}}},
			}},
		},
		Allocatable: []Devices{
			{Resource: "nvidia.com/gpu", IDs: []string{gpu0, gpu1}},
			{Resource: "nvidia.com/mig-1g.18gb", IDs: []string{mig0}},
		},
	}, n)
}

func TestParseNodeErrors(t *testing.T) {
	alloc := `"allocatable": [{"resource": "nvidia.com/gpu", "ids": ["` + gpu0 + `", "` + gpu1 + `"]}]`
	ctr := func(devices string) string {
		return `{"pods": [{"namespace": "ml", "name": "p", "containers": [{"name": "c", "devices": [` + devices + `]}]}], ` + alloc + `}`
	}
	gpu := func(ids ...string) string {
		return `{"resource": "nvidia.com/gpu", "ids": ["` + strings.Join(ids, `", "`) + `"]}`
	}
	for _, tc := range []struct {
		name, in, want string
	}{
		{"not JSON", `pods:`, "invalid character"},
		{"unknown key", `{"pods": [], "nodes": []}`, `unknown field "nodes"`},
		{"unknown pod key", `{"pods": [{"namespace": "ml", "name": "p", "uid": "", "labels": {}}]}`, `unknown field "labels"`},
		{"trailing data", `{"pods": []} {}`, "data after the JSON object"},
		{"wrong type", `{"pods": {}}`, "cannot unmarshal object"},
		{"no namespace", `{"pods": [{"name": "p", "containers": [{"name": "c"}]}]}`, "pods[0]: namespace and name are required"},
		{"no name", `{"pods": [{"namespace": "ml", "containers": [{"name": "c"}]}]}`, "pods[0]: namespace and name are required"},
		{"two pods of a name", `{"pods": [{"namespace": "ml", "name": "p", "containers": [{"name": "c"}]}, {"namespace": "ml", "name": "p", "containers": [{"name": "c"}]}]}`,
			"pods[1] (ml/p): a second pod of this namespace and name"},
		{"no containers", `{"pods": [{"namespace": "ml", "name": "p"}]}`, "pods[0] (ml/p): no containers"},
		{"container without a name", `{"pods": [{"namespace": "ml", "name": "p", "containers": [{}]}]}`, "pods[0] (ml/p) containers[0]: name is required"},
		{"two containers of a name", `{"pods": [{"namespace": "ml", "name": "p", "containers": [{"name": "c"}, {"name": "c"}]}]}`,
			"container c: a second container of this name"},
		{"bad uid", `{"pods": [{"namespace": "ml", "name": "p", "uid": "7A41C0DE-0000-4000-8000-000000000001", "containers": [{"name": "c"}]}]}`,
			`uid "7A41C0DE-0000-4000-8000-000000000001" is not`},
		{"uid with underscores", `{"pods": [{"namespace": "ml", "name": "p", "uid": "7a41c0de_0000_4000_8000_000000000001", "containers": [{"name": "c"}]}]}`,
			"is not 8-4-4-4-12"},
		{"bad container id", `{"pods": [{"namespace": "ml", "name": "p", "containers": [{"name": "c", "id": "7a41"}]}]}`, `id "7a41" is not 64 lowercase hex`},
		{"no resource", ctr(`{"ids": ["` + gpu0 + `"]}`), "devices[0]: resource is required"},
		{"no ids", ctr(`{"resource": "nvidia.com/gpu"}`), "devices[0]: ids are required"},
		{"empty id", ctr(gpu("")), "an empty device id"},
		{"id twice", ctr(gpu(gpu0, gpu0)), "listed twice"},
		{"not allocatable", ctr(gpu("GPU-other")), `device "GPU-other" is not in allocatable`},
		{"other resource", ctr(`{"resource": "nvidia.com/mig-1g.18gb", "ids": ["` + gpu0 + `"]}`), "is allocatable as nvidia.com/gpu, not nvidia.com/mig-1g.18gb"},
		{"allocated twice", `{"pods": [{"namespace": "ml", "name": "p", "containers": [{"name": "a", "devices": [` + gpu(gpu0) + `]}, {"name": "b", "devices": [` + gpu(gpu0) + `]}]}], ` + alloc + `}`,
			"already allocated to ml/p/a"},
		{"allocatable twice", `{"pods": [], "allocatable": [` + gpu(gpu0) + `, {"resource": "nvidia.com/gpu.shared", "ids": ["` + gpu0 + `"]}]}`,
			"already allocatable under nvidia.com/gpu"},
		{"allocatable without ids", `{"pods": [], "allocatable": [{"resource": "nvidia.com/gpu"}]}`, "allocatable[0]: ids are required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseNode(strings.NewReader(tc.in))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestParseNodeTooLarge(t *testing.T) {
	big := `{"comment": "` + strings.Repeat("x", maxPodsFile) + `", "pods": []}`
	_, err := ParseNode(strings.NewReader(big))
	require.ErrorContains(t, err, "larger than")
}

// TestParseNodeAllErrors: every problem is reported at once, not only the
// first.
func TestParseNodeAllErrors(t *testing.T) {
	_, err := ParseNode(strings.NewReader(`{"pods": [{"namespace": "ml"}, {"namespace": "ml", "name": "p"}]}`))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "pods[0]: namespace and name are required")
	assert.Contains(t, err.Error(), "pods[1] (ml/p): no containers")
}

// TestDemoPodsFile checks make demo's pods file against the rest of the
// demo: every device allocated is a GPU of the demo scenario, and each pod
// that holds a GPU runs that GPU's processes: their cgroup (the demo's
// proc_root) names the pod's UID and the container's id. Without that the
// receiver would not put the pod's names on the GPU (the allocation and the
// processes must agree on one pod).
func TestDemoPodsFile(t *testing.T) {
	root := filepath.Join("..", "..")
	f, err := os.Open(filepath.Join(root, "testdata", "demo", "pods.json"))
	require.NoError(t, err)
	defer f.Close()
	n, err := ParseNode(f)
	require.NoError(t, err)
	require.NotEmpty(t, n.Pods)

	raw, err := os.ReadFile(filepath.Join(root, "testdata", "scenarios", "demo.json"))
	require.NoError(t, err)
	var scenario struct {
		GPUs []struct {
			UUID      string `json:"uuid"`
			Processes []struct {
				PID int `json:"pid"`
			} `json:"processes"`
		} `json:"gpus"`
	}
	require.NoError(t, json.Unmarshal(raw, &scenario))
	pidsOf := map[string][]int{}
	for _, g := range scenario.GPUs {
		pidsOf[g.UUID] = []int{}
		for _, p := range g.Processes {
			pidsOf[g.UUID] = append(pidsOf[g.UUID], p.PID)
		}
	}
	for _, d := range n.Allocatable {
		for _, id := range d.IDs {
			_, ok := pidsOf[id]
			assert.True(t, ok, "allocatable device %s is no GPU of the demo scenario", id)
		}
	}
	allocated := 0
	for _, p := range n.Pods {
		for _, c := range p.Containers {
			for _, d := range c.Devices {
				for _, id := range d.IDs {
					allocated++
					pids := pidsOf[id]
					require.NotEmpty(t, pids, "%s/%s holds %s, which runs no process in the scenario", p.Namespace, p.Name, id)
					require.NotEmpty(t, p.UID, "%s/%s: uid is needed to check it against the cgroups", p.Namespace, p.Name)
					require.NotEmpty(t, c.ID, "%s/%s %s: id is needed to check it against the cgroups", p.Namespace, p.Name, c.Name)
					for _, pid := range pids {
						cg, err := os.ReadFile(filepath.Join(root, "testdata", "demo", "proc", strconv.Itoa(pid), "cgroup"))
						require.NoError(t, err)
						s := string(cg)
						assert.Contains(t, s, "-pod"+strings.ReplaceAll(p.UID, "-", "_")+".slice/",
							"process %d on %s: its cgroup does not name pod %s/%s's UID", pid, id, p.Namespace, p.Name)
						assert.Contains(t, s, "cri-containerd-"+c.ID+".scope",
							"process %d on %s: its cgroup does not name container %s's id", pid, id, c.Name)
						dir := strings.TrimSpace(strings.TrimPrefix(s, "0::"))
						_, err = os.Stat(filepath.Join(root, "testdata", "demo", "cgroup", dir, "cpu.max"))
						assert.NoError(t, err, "the container's cgroup files under testdata/demo/cgroup")
					}
				}
			}
		}
	}
	assert.Positive(t, allocated, "the demo's pods hold no GPU")
}

// FuzzParseNode: no input panics, and what is accepted is valid and reads
// back the same once written out.
func FuzzParseNode(f *testing.F) {
	f.Add(validNode)
	f.Add(`{"pods": []}`)
	f.Add(`{"pods": [{"namespace": "a", "name": "b", "containers": [{"name": "c", "devices": [{"resource": "r", "ids": ["x"]}]}]}], "allocatable": [{"resource": "r", "ids": ["x"]}]}`)
	f.Add(`{"pods": [{"namespace": "a"}]} x`)
	f.Fuzz(func(t *testing.T, in string) {
		n, err := ParseNode(strings.NewReader(in))
		if err != nil {
			return
		}
		require.NoError(t, n.Validate())
		out, err := json.Marshal(n)
		require.NoError(t, err)
		again, err := ParseNode(strings.NewReader(string(out)))
		require.NoError(t, err, "%s", out)
		assert.Equal(t, n, again)
	})
}

// TestDemoCPURates checks testdata/demo/cpu-rates, the containers whose CPU
// counters make demo moves (tools/demo.sh): each line names a container's
// cgroup directory under testdata/demo/cgroup with a cpu.stat that has
// usage_usec, and a rate in whole millicores within the container's CPU
// limit (cpu.max). One container runs at 90 % of its limit or more, so the
// demo shows input_bound (docs/design/waste.md).
func TestDemoCPURates(t *testing.T) {
	root := filepath.Join("..", "..", "testdata", "demo")
	raw, err := os.ReadFile(filepath.Join(root, "cpu-rates"))
	require.NoError(t, err)
	atLimit := 0
	for i, line := range strings.Split(string(raw), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		require.Len(t, f, 2, "cpu-rates line %d: a directory and millicores", i+1)
		milli, err := strconv.Atoi(f[1])
		require.NoError(t, err, "cpu-rates line %d", i+1)
		require.Positive(t, milli, "cpu-rates line %d", i+1)
		dir := filepath.Join(root, "cgroup", f[0])
		stat, err := os.ReadFile(filepath.Join(dir, "cpu.stat"))
		require.NoError(t, err, "cpu-rates line %d", i+1)
		assert.Regexp(t, `(?m)^usage_usec [0-9]+$`, string(stat), "%s/cpu.stat", f[0])
		max, err := os.ReadFile(filepath.Join(dir, "cpu.max"))
		require.NoError(t, err, "cpu-rates line %d", i+1)
		quota, period, _ := strings.Cut(strings.TrimSpace(string(max)), " ")
		if quota == "max" {
			continue
		}
		q, err1 := strconv.Atoi(quota)
		p, err2 := strconv.Atoi(period)
		require.NoError(t, errors.Join(err1, err2), "%s/cpu.max", f[0])
		limit := 1000 * q / p // millicores
		assert.LessOrEqual(t, milli, limit, "%s runs above its CPU limit", f[0])
		if 10*milli >= 9*limit {
			atLimit++
		}
	}
	assert.Equal(t, 1, atLimit, "containers at 90 %% of their CPU limit or more (input_bound)")
}
