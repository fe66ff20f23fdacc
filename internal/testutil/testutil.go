// Package testutil holds what the tests that run the built collector share:
// a buffer for a child's output and free loopback ports. Only tests import it.
package testutil // import "github.com/otelcol-nvml/otelcol-nvml/internal/testutil"

import (
	"bytes"
	"net"
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
