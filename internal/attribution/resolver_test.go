package attribution

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// withSelf gives a fake proc root a self/status with this NSpid line and a
// self/ns/pid link to nsLink, as a procfs shows them.
func withSelf(t *testing.T, root, nspid, nsLink string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Join(root, "self", "ns"), 0o755))
	status := "Name:\totelcol-nvml\nTgid:\t42\nPid:\t42\nNSpid:\t" + nspid + "\n"
	require.NoError(t, os.WriteFile(filepath.Join(root, "self", "status"), []byte(status), 0o644))
	require.NoError(t, os.Symlink(nsLink, filepath.Join(root, "self", "ns", "pid")))
}

func TestResolverPIDNamespace(t *testing.T) {
	tests := []struct {
		name    string
		nspid   string // "" for no self at all
		nsLink  string
		wantErr error
	}{
		{name: "not a procfs"},
		{name: "host /proc with hostPID", nspid: "4242", nsLink: "pid:[4026531836]"},
		{name: "host /proc mounted into the container", nspid: "4242\t42", nsLink: "pid:[4026532417]"},
		{name: "own namespace without hostPID", nspid: "42", nsLink: "pid:[4026532417]", wantErr: errPIDNamespace},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := fakeProc(t, map[int]string{4242: "crio-v2-systemd.txt"})
			if tt.nspid != "" {
				withSelf(t, root, tt.nspid, tt.nsLink)
			}
			core, logs := observer.New(zapcore.InfoLevel)
			r := newResolver(root, zap.New(core))
			for range 3 {
				o, err := r.resolve(4242)
				if tt.wantErr != nil {
					require.ErrorIs(t, err, tt.wantErr)
					assert.Zero(t, o)
					continue
				}
				require.NoError(t, err)
				assert.Equal(t, Owner{ContainerID: idCRIO, PodUID: uidCRIO}, o)
			}
			if tt.wantErr != nil {
				require.Equal(t, 1, logs.Len(), "the problem is said once")
				assert.Contains(t, logs.All()[0].Message, "own PID namespace")
				assert.Equal(t, zapcore.WarnLevel, logs.All()[0].Level)
			} else {
				assert.Zero(t, logs.Len())
			}
		})
	}
}

func TestResolverUnreadableRoot(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	r := newResolver(filepath.Join(t.TempDir(), "host", "proc"), zap.New(core))
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := r.resolve(1)
			assert.ErrorIs(t, err, os.ErrNotExist)
		}()
	}
	wg.Wait()
	assert.Equal(t, 1, logs.Len())

	file := filepath.Join(t.TempDir(), "proc")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	assert.Error(t, newResolver(file, nil).check())
}

func TestResolverMissingProcess(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	r := newResolver(fakeProc(t, map[int]string{7: "host-v2-init.txt"}), zap.New(core))
	_, err := r.resolve(12345)
	assert.ErrorIs(t, err, ErrProcessNotFound)
	o, err := r.resolve(7)
	require.NoError(t, err)
	assert.True(t, o.IsZero())
	assert.Zero(t, logs.Len(), "an exited process is not worth a log")
}

// TestResolverRealProc runs against this machine's /proc: whatever the
// verdict, the collector's own process resolves or the error says why.
func TestResolverRealProc(t *testing.T) {
	r := newResolver("/proc", nil)
	o, err := r.resolve(os.Getpid())
	switch {
	case errors.Is(err, errPIDNamespace):
		t.Logf("this test runs in its own PID namespace")
	case err != nil:
		t.Fatalf("resolve self: %v", err)
	default:
		t.Logf("this test's process: %+v", o)
		checkOwnerShape(t, o)
	}
}
