package attribution

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

func TestParseGPUStat(t *testing.T) {
	tests := []struct {
		in   string
		want SlurmAllocation
		ok   bool
	}{
		{in: "4711 1001\n", want: SlurmAllocation{JobID: "4711", UID: 1001}, ok: true},
		{in: "4711 1001", want: SlurmAllocation{JobID: "4711", UID: 1001}, ok: true},
		{in: "45916256\t262563\r\n", want: SlurmAllocation{JobID: "45916256", UID: 262563}, ok: true},
		{in: "4711 0", want: SlurmAllocation{JobID: "4711", UID: 0}, ok: true},
		{in: "4294967295 4294967295", want: SlurmAllocation{JobID: "4294967295", UID: 4294967295}, ok: true},
		{in: ""},
		{in: "\n"},
		{in: "4711"},                 // no uid
		{in: "4711 1001 extra"},      // three fields
		{in: "0 1001"},               // no job 0
		{in: "04711 1001"},           // Slurm writes no leading zero
		{in: "4711 01001"},           // nor a uid with one
		{in: "4294967296 1001"},      // above uint32
		{in: "4711 4294967296"},      // above uint32
		{in: "-4711 1001"},           // a sign
		{in: "4711_1 1001"},          // an array task's name, not its job id
		{in: "4711 alice"},           // a name, not a uid
		{in: "job 4711"},             // words
		{in: "4711 1001\x00"},        // a NUL
		{in: "\xff\xfe4711 1001"},    // not text
		{in: "12345678901234 1001"},  // too long
		{in: "4711 12345678901234"},  // too long
		{in: "4711 1001\n4712 1002"}, // two allocations in one file
	}
	for _, tt := range tests {
		got, ok := ParseGPUStat([]byte(tt.in))
		assert.Equal(t, tt.ok, ok, "%q", tt.in)
		assert.Equal(t, tt.want, got, "%q", tt.in)
	}
}

func TestIsGPUStatName(t *testing.T) {
	for name, want := range map[string]bool{
		"0": true, "7": true, "15": true, "GPU-03aa20a1-2e97-d125-629d-fd4e5734553f": true,
		"MIG-265a219d-a49f-578a-825d-222c72699c16": true,
		"01": false, "": false, "x": false, ".0.tmp": false, "12345": false, "README": false,
	} {
		assert.Equal(t, want, isGPUStatName(name), "%q", name)
	}
}

// writeGPUStat writes files into a new gpustat directory.
func writeGPUStat(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "gpustat")
	require.NoError(t, os.Mkdir(dir, 0o755))
	for name, content := range files {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644))
	}
	return dir
}

func names(uid string) string {
	return map[string]string{"1001": "alice", "1002": "bob"}[uid] + "|" + uid
}

func TestGPUStatDirOwner(t *testing.T) {
	const (
		gpu0 = "GPU-00000000-0000-4000-8000-000000000000"
		gpu1 = "GPU-00000000-0000-4000-8000-000000000001"
		gpu2 = "GPU-00000000-0000-4000-8000-000000000002"
		mig  = "MIG-265a219d-a49f-578a-825d-222c72699c16"
	)
	dir := writeGPUStat(t, map[string]string{
		"0":  "4711 1001\n",
		gpu1: "4712 1002\n",
		"1":  "9999 1001\n", // the UUID's file wins over the index's
		mig:  "4713 4123456789\n",
		"3":  "not an allocation\n",
	})
	require.NoError(t, os.Mkdir(filepath.Join(dir, "2"), 0o755)) // a directory is no file
	core, logs := observer.New(zapcore.DebugLevel)
	d := newGPUStatDir(dir, names, zap.New(core))
	d.refresh()

	tests := []struct {
		uuid  string
		index int
		want  Owner
		ok    bool
	}{
		{uuid: gpu0, index: 0, want: Owner{SlurmJobID: "4711", UserName: "alice|1001"}, ok: true},
		{uuid: gpu1, index: 1, want: Owner{SlurmJobID: "4712", UserName: "bob|1002"}, ok: true},
		{uuid: gpu2, index: 2},
		{uuid: gpu2, index: 3},
		{uuid: gpu0, index: -1}, // index unknown
		{uuid: mig, index: 0, want: Owner{SlurmJobID: "4713", UserName: "|4123456789"}, ok: true},
		{uuid: "MIG-00000000-0000-4000-8000-000000000009", index: 0}, // a MIG device is not its GPU's index
	}
	for _, tt := range tests {
		got, ok := d.owner(tt.uuid, tt.index)
		assert.Equal(t, tt.ok, ok, "%s %d", tt.uuid, tt.index)
		assert.Equal(t, tt.want, got, "%s %d", tt.uuid, tt.index)
	}
	assert.Equal(t, 1, logs.FilterMessageSnippet("does not hold").Len())

	// The epilog removes a file; the next refresh sees it, and logs the
	// same cause no more.
	require.NoError(t, os.Remove(filepath.Join(dir, "0")))
	d.refresh()
	_, ok := d.owner(gpu0, 0)
	assert.False(t, ok)
	assert.Equal(t, 1, logs.FilterMessageSnippet("does not hold").Len())
}

func TestGPUStatDirAbsentIsSilent(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	d := newGPUStatDir(filepath.Join(t.TempDir(), "gpustat"), nil, zap.New(core))
	d.refresh()
	_, ok := d.owner("GPU-00000000-0000-4000-8000-000000000000", 0)
	assert.False(t, ok)
	assert.Zero(t, logs.Len())
}

func TestGPUStatDirUnreadableIsLoggedOnce(t *testing.T) {
	if runtime.GOOS != "linux" || os.Geteuid() == 0 {
		t.Skip("root reads a mode-0 directory")
	}
	dir := writeGPUStat(t, map[string]string{"0": "4711 1001"})
	require.NoError(t, os.Chmod(dir, 0))
	t.Cleanup(func() { _ = os.Chmod(dir, 0o755) })
	core, logs := observer.New(zapcore.DebugLevel)
	d := newGPUStatDir(dir, nil, zap.New(core))
	d.refresh()
	d.refresh()
	assert.Equal(t, 1, logs.FilterMessageSnippet("Cannot read the Slurm GPU allocation directory").Len())
}

// A file named like a device that is not a plain file: a FIFO would block
// a read forever. It is left out, not read.
func TestGPUStatDirSkipsNonRegularFiles(t *testing.T) {
	dir := writeGPUStat(t, map[string]string{"1": "4711 1001"})
	require.NoError(t, os.Symlink(filepath.Join(dir, "1"), filepath.Join(dir, "0")))
	d := newGPUStatDir(dir, nil, zap.NewNop())
	d.refresh()
	_, ok := d.owner("GPU-00000000-0000-4000-8000-000000000000", 0)
	assert.False(t, ok, "a symlink is not followed")
	o, ok := d.owner("GPU-00000000-0000-4000-8000-000000000001", 1)
	assert.True(t, ok)
	assert.Equal(t, Owner{SlurmJobID: "4711", UserName: "1001"}, o, "no user names: the uid")
}

// Attributor: a GPU allocated by its gpustat file is Allocated, Holders
// names the job, and Attribute gives the GPU its owner without a process.
func TestAttributorSlurmAllocation(t *testing.T) {
	dir := writeGPUStat(t, map[string]string{"0": "4711 1001"})
	a := New(Config{SlurmGPUStatDir: dir}, nil)
	const gpu0 = "GPU-00000000-0000-4000-8000-000000000000"
	assert.False(t, a.Allocated(gpu0), "nothing before the first Refresh")
	a.SetIndex(gpu0, 0)
	a.Refresh()
	assert.True(t, a.Allocated(gpu0))
	want := Owner{SlurmJobID: "4711", UserName: "1001"}
	assert.Equal(t, []Owner{want}, a.Holders(gpu0))
	_, gpu := a.Attribute(gpu0, nil)
	assert.Equal(t, want, gpu)
	assert.False(t, a.Allocated("GPU-00000000-0000-4000-8000-000000000001"))
}
