package layers

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The checker itself: an upward import, an import between two packages of
// one rank, and a package without a rank are each found.
func TestUpwardFindsAnUpwardImport(t *testing.T) {
	dir := t.TempDir()
	write := func(name, src string) {
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o700))
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(src), 0o600))
	}
	write("top.go", "package top\n\nimport _ \"m/low\"\n")
	write("low/low.go", "package low\n\nimport _ \"m\"\n")
	write("low/side.go", "package low\n\nimport _ \"m/peer\"\n")
	write("peer/peer.go", "package peer\n")
	write("stray/stray.go", "package stray\n")
	got := Upward(t, dir, "m", map[string]int{".": 1, "low": 0, "peer": 0})
	assert.ElementsMatch(t, []string{
		"low/low.go imports . (rank 1) from rank 0",
		"low/side.go imports peer (rank 0) from rank 0",
		"stray has no rank",
	}, got)
}
