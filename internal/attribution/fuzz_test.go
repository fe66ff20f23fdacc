package attribution

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
