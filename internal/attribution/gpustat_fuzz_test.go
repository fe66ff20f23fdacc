package attribution

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"go.uber.org/zap"
)

// FuzzParseGPUStat: any file content parses without a panic, and what is
// accepted is a job id and uid that Slurm writes, which write back as the
// content read (but for white space).
func FuzzParseGPUStat(f *testing.F) {
	for _, seed := range []string{"4711 1001\n", "45916256 262563", "0 0", "4711", "4711 1001 1", "04711 1", "4294967296 1", "\x00", "4711\t1001\r\n"} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		a, ok := ParseGPUStat(b)
		if !ok {
			if a != (SlurmAllocation{}) {
				t.Fatalf("%q: not ok, but %+v", b, a)
			}
			return
		}
		if !isSlurmJobID(a.JobID) {
			t.Fatalf("%q: job id %q", b, a.JobID)
		}
		again, ok := ParseGPUStat([]byte(a.JobID + " " + strconv.FormatUint(uint64(a.UID), 10) + "\n"))
		if !ok || again != a {
			t.Fatalf("%q: %+v does not read back (%+v)", b, a, again)
		}
	})
}

// FuzzGPUStatDir: whatever a file holds, and whatever it is named, a
// refresh neither panics nor gives an owner other than a job and a user.
func FuzzGPUStatDir(f *testing.F) {
	f.Add("0", []byte("4711 1001\n"))
	f.Add("MIG-265a219d-a49f-578a-825d-222c72699c16", []byte("45916256 262563"))
	f.Add("GPU-x", []byte("4711"))
	f.Fuzz(func(t *testing.T, name string, content []byte) {
		if name == "" || name == "." || name == ".." || filepath.Base(name) != name {
			return
		}
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, name), content, 0o644); err != nil {
			return // a name the file system refuses
		}
		d := newGPUStatDir(dir, nil, zap.NewNop())
		d.refresh()
		index := 0
		if n, err := strconv.Atoi(name); err == nil {
			index = n
		}
		for _, id := range []string{name, "GPU-00000000-0000-4000-8000-000000000000"} {
			o, ok := d.owner(id, index)
			if !ok {
				continue
			}
			if !isSlurmJobID(o.SlurmJobID) || o.UserName == "" || o.PodName != "" || o.ContainerID != "" || o.SlurmStep != "" {
				t.Fatalf("name %q content %q: owner %+v", name, content, o)
			}
		}
	})
}
