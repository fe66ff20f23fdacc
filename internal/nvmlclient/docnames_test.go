package nvmlclient

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Issue 26: a comment that names an identifier names one that exists. A
// camelCase word of a comment (readCounters, markLost) is taken for a Go
// name; so is the first word of a declaration's doc comment, which must be
// the declaration's own name when it is one of the package's names.
func TestCommentsNameWhatExists(t *testing.T) {
	files := treeFiles(t, true)
	files = slices.DeleteFunc(files, func(f string) bool { return f == "docnames_test.go" }) // its examples
	assert.Empty(t, staleNames(t, files))
}

// The checker itself: a renamed function and a comment left behind.
func TestStaleNamesFindsAGoneName(t *testing.T) {
	dir := t.TempDir()
	src := `package p

// readCounters puts the counters into s.
func read() {}

// takeOne takes one; see markLost.
func takeOne() { takeOne() }

// NVML's nvmlDeviceGetFieldValues and its scopeId are not Go names.
var ScopeId int
`
	f := filepath.Join(dir, "p.go")
	require.NoError(t, writeFile(f, src))
	got := staleNames(t, []string{f})
	assert.ElementsMatch(t, []string{"p.go: readCounters", "p.go: read's doc names readCounters", "p.go: markLost"}, got)
}

var camel = regexp.MustCompile(`\b[a-z][a-z0-9]*[A-Z][A-Za-z0-9]*\b`)

// staleNames lists the names that the comments of files give and that no
// identifier of files has.
func staleNames(t *testing.T, files []string) []string {
	t.Helper()
	fset := token.NewFileSet()
	idents := map[string]bool{}
	var parsed []*ast.File
	for _, name := range files {
		f, err := parser.ParseFile(fset, name, nil, parser.ParseComments)
		require.NoError(t, err)
		parsed = append(parsed, f)
		ast.Inspect(f, func(n ast.Node) bool {
			if id, ok := n.(*ast.Ident); ok {
				idents[strings.ToLower(id.Name)] = true
			}
			return true
		})
	}
	var stale []string
	for i, f := range parsed {
		base := filepath.Base(files[i])
		for _, cg := range f.Comments {
			for _, w := range camel.FindAllString(cg.Text(), -1) {
				if !strings.HasPrefix(w, "nvml") && !idents[strings.ToLower(w)] {
					stale = append(stale, base+": "+w)
				}
			}
		}
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Doc == nil {
				continue
			}
			first, _, _ := strings.Cut(strings.TrimSpace(fd.Doc.Text()), " ")
			if first != fd.Name.Name && !strings.HasPrefix(first, "nvml") && first == camel.FindString(first) {
				stale = append(stale, base+": "+fd.Name.Name+"'s doc names "+first)
			}
		}
	}
	slices.Sort(stale)
	return slices.Compact(stale)
}

func writeFile(name, src string) error { return os.WriteFile(name, []byte(src), 0o600) }
