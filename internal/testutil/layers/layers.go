// Package layers checks that the packages of a tree import one another
// only downward: each package has a rank, and imports only packages of a
// lower rank. The layering tests of internal/nvmlclient and of the nvml
// receiver call it.
package layers // import "github.com/otelcol-nvml/otelcol-nvml/internal/testutil/layers"

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Upward lists the imports, by the Go files (tests among them) of the
// packages under root, whose import path is module, that do not go to a
// package of a lower rank, and the packages that have no rank. ranks is
// keyed by the package's folder relative to root ("." for root itself).
func Upward(t testing.TB, root, module string, ranks map[string]int) []string {
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
