package nvmlclient

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const importPath = "github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient"

// layerRanks gives each package under internal/nvmlclient its rank in the
// layout of docs/design/architecture.md, lowest first: a package imports
// only packages of a lower rank. figuregen is a generator run by go
// generate, imported by nobody; it stands beside the layers.
var layerRanks = map[string]int{
	"figure":             0, // what can be asked for, and what a read gives: Figure, Sample
	"guard":              0, // the call order: lane, GPM gate, one use, calls in flight
	"raw":                0, // the bounded list calls, straight to the library
	"internal/figuregen": 0, // run by go generate; imports nothing of nvmlclient
	"call":               1, // the read table, the one way a call is made, its record of answers
	"collect":            2, // the collectors, one file each: GPM and utilization, getters, processes, fields, health, MIG, counters
	".":                  3, // Client, Device, inventory, options, the event watcher: the receiver's one entry point
}

// Issue 26: the packages import only downward, in the order the
// architecture draws, and each package has a rank.
func TestPackagesImportOnlyDownward(t *testing.T) {
	assert.Empty(t, upwardImports(t, ".", importPath, layerRanks))
}

// The checker itself: an upward import, an import between two packages of
// one rank, and a package without a rank are each found.
func TestUpwardImportsFindsAnUpwardImport(t *testing.T) {
	dir := t.TempDir()
	write := func(name, src string) {
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o700))
		require.NoError(t, writeFile(filepath.Join(dir, name), src))
	}
	write("top.go", "package top\n\nimport _ \"m/low\"\n")
	write("low/low.go", "package low\n\nimport _ \"m\"\n")
	write("low/side.go", "package low\n\nimport _ \"m/peer\"\n")
	write("peer/peer.go", "package peer\n")
	write("stray/stray.go", "package stray\n")
	got := upwardImports(t, dir, "m", map[string]int{".": 1, "low": 0, "peer": 0})
	assert.ElementsMatch(t, []string{
		"low/low.go imports . (rank 1) from rank 0",
		"low/side.go imports peer (rank 0) from rank 0",
		"stray has no rank",
	}, got)
}

// upwardImports lists the imports, by the Go files (tests among them) of the
// packages under root, whose module path is module, that do not go to a
// package of a lower rank, and the packages that have no rank.
func upwardImports(t *testing.T, root, module string, ranks map[string]int) []string {
	t.Helper()
	var bad []string
	seen := map[string]bool{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") {
			return err
		}
		rel, err := filepath.Rel(root, filepath.Dir(p))
		if err != nil {
			return err
		}
		pkg := filepath.ToSlash(rel)
		rank, ok := ranks[pkg]
		if !ok {
			if !seen[pkg] {
				bad = append(bad, pkg+" has no rank")
			}
			seen[pkg] = true
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), p, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, spec := range f.Imports {
			imp, err := strconv.Unquote(spec.Path.Value)
			if err != nil {
				return err
			}
			var to string
			switch {
			case imp == module:
				to = "."
			case strings.HasPrefix(imp, module+"/"):
				to = strings.TrimPrefix(imp, module+"/")
			default:
				continue
			}
			if to == pkg {
				continue
			}
			if toRank, ok := ranks[to]; !ok || toRank >= rank {
				file := path.Join(pkg, filepath.Base(p))
				bad = append(bad, file+" imports "+to+" (rank "+strconv.Itoa(toRank)+") from rank "+strconv.Itoa(rank))
			}
		}
		return nil
	})
	require.NoError(t, err)
	return bad
}
