package main

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// figure/figures_gen.go and figures_gen.go are what the generator makes of
// call/plain.go now: a row added without go generate fails here (and the
// read table panics at init).
func TestGeneratedFiguresAreCurrent(t *testing.T) {
	rows, err := plainRows("../../call/plain.go")
	require.NoError(t, err)
	for path, write := range map[string]func([]row) ([]byte, error){"../../figure/figures_gen.go": render, "../../figures_gen.go": renderAliases} {
		want, err := write(rows)
		require.NoError(t, err)
		got, err := os.ReadFile(path)
		require.NoError(t, err)
		assert.Equal(t, string(want), string(got), "run go generate ./internal/nvmlclient/call")
	}
}

// A row without its figure is refused, not skipped.
func TestRowWithoutFigureFails(t *testing.T) {
	src := t.TempDir() + "/plain.go"
	require.NoError(t, os.WriteFile(src, []byte("package p\n\nvar plainReads = [...]Spec{{Name: \"x\"}}\n"), 0o600))
	_, err := plainRows(src)
	assert.Error(t, err)
}
