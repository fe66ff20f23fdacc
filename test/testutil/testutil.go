// Package testutil holds what tests share: for those that run the built
// collector, a buffer for a child's output, free loopback ports and the
// paths given as flags; for the receiver's, the container resources of a
// scrape (resources.go). Only tests import it.
package testutil // import "github.com/otelcol-nvml/otelcol-nvml/test/testutil"

import (
	"bytes"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// SyncBuffer collects a child process's output while the test reads it.
type SyncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// FreePort returns a 127.0.0.1 port that was free a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("finding a free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// AbsFlag returns the absolute form of the path given as flag -name, and
// fails the test when it is empty or names nothing.
func AbsFlag(t testing.TB, name, val string) string {
	t.Helper()
	if val == "" {
		t.Fatalf("-%s is required (see the package comment)", name)
	}
	p, err := filepath.Abs(val)
	if err != nil {
		t.Fatalf("-%s: %v", name, err)
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("-%s: %v", name, err)
	}
	return p
}
