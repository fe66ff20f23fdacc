package procinfo

import (
	"os"
	"os/user"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func writeProc(t *testing.T, root string, pid, comm, status, cmdline string) {
	t.Helper()
	dir := filepath.Join(root, pid)
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "comm"), []byte(comm+"\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "status"), []byte(status), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "cmdline"), []byte(cmdline), 0o644))
}

func TestRead(t *testing.T) {
	root := t.TempDir()
	writeProc(t, root, "4242", "python3", "Name:\tpython3\nUid:\t0\t0\t0\t0\nGid:\t0\t0\t0\t0\n",
		"python3\x00train.py\x00--token=secret\x00")
	writeProc(t, root, "4343", "torchrun", "Name:\ttorchrun\nUid:\t4000123\t4000123\t4000123\t4000123\n", "torchrun\x00")
	r, err := New(root)
	require.NoError(t, err)

	info, err := r.Read(4242, false)
	require.NoError(t, err)
	root0, _ := user.LookupId("0")
	want := "0"
	if root0 != nil {
		want = root0.Username
	}
	assert.Equal(t, Info{ExecutableName: "python3", Owner: want}, info, "no command line unless asked")

	info, err = r.Read(4242, true)
	require.NoError(t, err)
	assert.Equal(t, "python3 train.py --token=secret", info.CommandLine)

	info, err = r.Read(4343, false)
	require.NoError(t, err)
	assert.Equal(t, "4000123", info.Owner, "a uid without a user name stays numeric")

	_, err = r.Read(999999, false)
	assert.Error(t, err, "an exited process")
}

func TestNewBadRoot(t *testing.T) {
	_, err := New(filepath.Join(t.TempDir(), "missing"))
	assert.Error(t, err)
}
