package collect

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Issue 26: a collector's type and its baseline and read are in one file,
// the file a reader opens for that part of the read.
func TestEachCollectorIsOneFile(t *testing.T) {
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	fset := token.NewFileSet()
	typeFile := map[string]string{}      // type name → file of its declaration
	methodFiles := map[string][]string{} // type name → files of its baseline and read
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		require.NoError(t, err)
		for _, decl := range file.Decls {
			switch decl := decl.(type) {
			case *ast.GenDecl:
				for _, spec := range decl.Specs {
					if ts, ok := spec.(*ast.TypeSpec); ok {
						typeFile[ts.Name.Name] = f
					}
				}
			case *ast.FuncDecl:
				if decl.Recv == nil || decl.Name.Name != "baseline" && decl.Name.Name != "read" {
					continue
				}
				typ := decl.Recv.List[0].Type
				if star, ok := typ.(*ast.StarExpr); ok {
					typ = star.X
				}
				if id, ok := typ.(*ast.Ident); ok {
					methodFiles[id.Name] = append(methodFiles[id.Name], f)
				}
			}
		}
	}
	collectors := 0
	for name, fs := range methodFiles {
		if len(fs) < 2 {
			continue // not a collector: it needs both
		}
		collectors++
		for _, f := range fs {
			assert.Equal(t, typeFile[name], f, "%s's baseline or read is not in the file of its type", name)
		}
	}
	assert.GreaterOrEqual(t, collectors, 7, "the checker finds the collectors")
}
