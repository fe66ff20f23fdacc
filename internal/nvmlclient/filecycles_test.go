package nvmlclient

import (
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Issue 35: no two files of this package use each other. A file uses
// another when it refers to a package-level func, method, type, var or
// const declared there; each file stands on the files below it.
func TestRootFilesUseEachOtherOneWay(t *testing.T) {
	assert.Empty(t, fileCycles(t, "."))
}

// The checker itself: a method called across files, whose receiver type
// is the other file's, is a pair; a one-way use is not.
func TestFileCyclesFindsAPair(t *testing.T) {
	dir := t.TempDir()
	write := func(name, src string) { require.NoError(t, writeFile(filepath.Join(dir, name), src)) }
	write("a.go", "package p\n\ntype A struct{}\n\nfunc (a A) Run() { a.step() }\n")
	write("b.go", "package p\n\nfunc (A) step() { _ = low }\n")
	write("c.go", "package p\n\nvar low = 1\n")
	write("d.go", "//go:build !cgo\n\npackage p\n\nconst x = low\n")
	assert.Equal(t, []string{"a.go <-> b.go"}, fileCycles(t, dir))
}

// fileCycles lists the pairs of non-test files of the package in dir that
// use each other, as a.go <-> b.go, over its builds with and without cgo.
// Imports are not loaded: a value of another package's type cannot reach
// this package's declarations.
func fileCycles(t *testing.T, dir string) []string {
	t.Helper()
	uses := map[[2]string]bool{}
	for _, cgo := range []bool{true, false} {
		ctx := build.Default
		ctx.CgoEnabled = cgo
		entries, err := os.ReadDir(dir)
		require.NoError(t, err)
		fset := token.NewFileSet()
		var files []*ast.File
		for _, e := range entries {
			name := e.Name()
			if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
				continue
			}
			if ok, err := ctx.MatchFile(dir, name); err != nil || !ok {
				require.NoError(t, err)
				continue
			}
			f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, 0)
			require.NoError(t, err)
			files = append(files, f)
		}
		info := &types.Info{Uses: map[*ast.Ident]types.Object{}}
		conf := types.Config{Importer: emptyImporter{}, Error: func(error) {}}
		pkg, _ := conf.Check("p", fset, files, info)
		for id, obj := range info.Uses {
			if obj.Pkg() != pkg || !declaredAtTop(obj, pkg) {
				continue
			}
			from, to := path.Base(fset.Position(id.Pos()).Filename), path.Base(fset.Position(obj.Pos()).Filename)
			if from != to {
				uses[[2]string{from, to}] = true
			}
		}
	}
	var pairs []string
	for use := range uses {
		if use[0] < use[1] && uses[[2]string{use[1], use[0]}] {
			pairs = append(pairs, use[0]+" <-> "+use[1])
		}
	}
	slices.Sort(pairs)
	return pairs
}

// declaredAtTop says obj is a package-level declaration of pkg, or a
// method.
func declaredAtTop(obj types.Object, pkg *types.Package) bool {
	if fn, ok := obj.(*types.Func); ok {
		return fn.Type().(*types.Signature).Recv() != nil || obj.Parent() == pkg.Scope()
	}
	return obj.Parent() == pkg.Scope()
}

// emptyImporter gives every import as an empty package.
type emptyImporter struct{}

func (emptyImporter) Import(p string) (*types.Package, error) {
	pkg := types.NewPackage(p, path.Base(p))
	pkg.MarkComplete()
	return pkg, nil
}
