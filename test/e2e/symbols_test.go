//go:build e2e

package e2e

import (
	"debug/elf"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/otelcol-nvml/otelcol-nvml/test/testutil"
)

// A symbol the process calls but the library lacks kills the process
// ("symbol lookup error"). This test follows every go-nvml method that
// internal/nvmlclient calls down to the C functions it reaches, through
// go-nvml's sources (resolving the versioned names as go-nvml's
// updateVersionedSymbols does at load: the newest version), and checks that
// the fake library exports each one. When the receiver starts calling a new
// NVML function, this test names it.
func TestFakeLibraryExportsEverySymbolTheReceiverCalls(t *testing.T) {
	t.Parallel()
	// The client, and the receiver's plain readings, which name the go-nvml
	// getters the client calls for them (nvml.Device.GetPowerUsage).
	required := requiredSymbols(t, goNVMLPackageDir(t), filepath.Join("..", "..", "internal", "nvmlclient"),
		filepath.Join("..", "..", "receiver", "nvmlreceiver", "internal", "record"))
	// The analysis itself must see the calls it exists for.
	for _, s := range []string{"nvmlInit_v2", "nvmlShutdown", "nvmlErrorString", "nvmlDeviceGetCount_v2",
		"nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetPciInfo_v3", "nvmlDeviceGetMemoryInfo_v2", "nvmlDeviceGetSamples",
		"nvmlDeviceGetPowerUsage", "nvmlDeviceGetMaxClockInfo", "nvmlDeviceGetMaxPcieLinkWidth"} {
		if !required[s] {
			t.Errorf("the call analysis missed %s: fix requiredSymbols", s)
		}
	}

	f, err := elf.Open(testutil.AbsFlag(t, "fakenvml", *fakeNVMLPath))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	syms, err := f.DynamicSymbols()
	if err != nil {
		t.Fatal(err)
	}
	exported := map[string]bool{}
	for _, s := range syms {
		// Weak: the generic getters (getters_gen.c), which dlsym finds alike.
		if bind := elf.ST_BIND(s.Info); s.Section != elf.SHN_UNDEF && elf.ST_TYPE(s.Info) == elf.STT_FUNC &&
			(bind == elf.STB_GLOBAL || bind == elf.STB_WEAK) {
			exported[s.Name] = true
		}
	}
	var names, missing []string
	for s := range required {
		names = append(names, s)
		if !exported[s] {
			missing = append(missing, s)
		}
	}
	sort.Strings(names)
	sort.Strings(missing)
	t.Logf("internal/nvmlclient reaches %d NVML symbols: %s", len(names), strings.Join(names, " "))
	if len(missing) > 0 {
		t.Errorf("the fake library lacks %s: a process on it would die; add them to test/fakenvml", strings.Join(missing, ", "))
	}
	for s := range exported {
		if !strings.HasPrefix(s, "nvml") {
			t.Errorf("the fake library exports %s; only nvml* symbols may leave it (exports.map)", s)
		}
	}
}

func goNVMLPackageDir(t *testing.T) string {
	t.Helper()
	dir := *goNVMLDir
	if dir == "" {
		out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/NVIDIA/go-nvml").Output()
		if err != nil {
			t.Fatalf("go list go-nvml: %v (or pass -gonvml)", err)
		}
		dir = strings.TrimSpace(string(out))
	}
	return filepath.Join(dir, "pkg", "nvml")
}

func parseDir(t *testing.T, dir string) []*ast.File {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var files []*ast.File
	for _, e := range entries {
		n := e.Name()
		if !strings.HasSuffix(n, ".go") || strings.HasSuffix(n, "_test.go") || strings.HasSuffix(n, "_mock.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, n), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	return files
}

// parseTree parses the Go files of dir and of every folder below it.
func parseTree(t *testing.T, dir string) []*ast.File {
	t.Helper()
	var files []*ast.File
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			files = append(files, parseDir(t, path)...)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

var symbolName = regexp.MustCompile(`^nvml[A-Z][A-Za-z0-9_]*$`)

func isC(e ast.Expr) bool {
	id, ok := e.(*ast.Ident)
	return ok && id.Name == "C"
}

func recvName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return ""
	}
	typ := fd.Recv.List[0].Type
	if st, ok := typ.(*ast.StarExpr); ok {
		typ = st.X
	}
	if id, ok := typ.(*ast.Ident); ok {
		return id.Name
	}
	return ""
}

// implementations pairs go-nvml's interfaces with the unexported types that
// implement them on the real library. A method called on a value of the
// interface runs the type's method.
var implementations = []struct {
	iface reflect.Type
	typ   string
}{
	{reflect.TypeOf((*nvml.Interface)(nil)).Elem(), "library"},
	{reflect.TypeOf((*nvml.ExtendedInterface)(nil)).Elem(), "library"},
	{reflect.TypeOf((*nvml.Device)(nil)).Elem(), "nvmlDevice"},
	{reflect.TypeOf((*nvml.GpmSample)(nil)).Elem(), "nvmlGpmSample"},
	{reflect.TypeOf((*nvml.EventSet)(nil)).Elem(), "nvmlEventSet"},
	{reflect.TypeOf((*nvml.GpuInstance)(nil)).Elem(), "nvmlGpuInstance"},
	{reflect.TypeOf((*nvml.ComputeInstance)(nil)).Elem(), "nvmlComputeInstance"},
	{reflect.TypeOf((*nvml.Unit)(nil)).Elem(), "nvmlUnit"},
	{reflect.TypeOf((*nvml.VgpuInstance)(nil)).Elem(), "nvmlVgpuInstance"},
	{reflect.TypeOf((*nvml.VgpuTypeId)(nil)).Elem(), "nvmlVgpuTypeId"},
}

func methodNames(typ reflect.Type) map[string]bool {
	out := map[string]bool{}
	for i := 0; i < typ.NumMethod(); i++ {
		out[typ.Method(i).Name] = true
	}
	return out
}

// requiredSymbols returns the C symbols of NVML that the non-test code in
// clientDirs reaches through go-nvml's package in nvmlDir.
func requiredSymbols(t *testing.T, nvmlDir string, clientDirs ...string) map[string]bool {
	t.Helper()
	funcs := map[string]*ast.FuncDecl{}
	methods := map[string]map[string]*ast.FuncDecl{}
	vars := map[string]string{}      // package var = function name
	versioned := map[string]string{} // var -> the newest version assigned at load
	for _, f := range parseDir(t, nvmlDir) {
		for _, decl := range f.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				if r := recvName(d); r != "" {
					if methods[r] == nil {
						methods[r] = map[string]*ast.FuncDecl{}
					}
					methods[r][d.Name.Name] = d
				} else {
					funcs[d.Name.Name] = d
				}
				if d.Name.Name == "updateVersionedSymbols" && d.Body != nil {
					ast.Inspect(d.Body, func(n ast.Node) bool {
						if as, ok := n.(*ast.AssignStmt); ok && len(as.Lhs) == 1 && len(as.Rhs) == 1 {
							l, lok := as.Lhs[0].(*ast.Ident)
							r, rok := as.Rhs[0].(*ast.Ident)
							if lok && rok && l.Name != "err" {
								versioned[l.Name] = r.Name // later assignments are newer
							}
						}
						return true
					})
				}
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					vs, ok := spec.(*ast.ValueSpec)
					if !ok || len(vs.Values) != len(vs.Names) {
						continue
					}
					for i, name := range vs.Names {
						if id, ok := vs.Values[i].(*ast.Ident); ok {
							vars[name.Name] = id.Name
						}
					}
				}
			}
		}
	}

	required := map[string]bool{}
	visited := map[*ast.FuncDecl]bool{}
	var visit func(fd *ast.FuncDecl)
	visitIdent := func(name string) {
		if v, ok := versioned[name]; ok {
			name = v
		} else if v, ok := vars[name]; ok {
			name = v
		}
		if fd := funcs[name]; fd != nil {
			visit(fd)
		}
	}
	visit = func(fd *ast.FuncDecl) {
		if fd == nil || fd.Body == nil || visited[fd] || fd.Name.Name == "updateVersionedSymbols" {
			return
		}
		visited[fd] = true
		if os.Getenv("E2E_SYMBOLS_TRACE") != "" {
			t.Logf("visit %s.%s", recvName(fd), fd.Name.Name)
		}
		ast.Inspect(fd.Body, func(n ast.Node) bool {
			switch x := n.(type) {
			case *ast.CallExpr:
				// C.nvmlX(...) is the symbol; x.M(...) may be a go-nvml method.
				if sel, ok := x.Fun.(*ast.SelectorExpr); ok {
					if id, ok := sel.X.(*ast.Ident); ok && id.Name == "C" {
						required[sel.Sel.Name] = true
					} else {
						for _, impl := range implementations {
							visit(methods[impl.typ][sel.Sel.Name])
						}
					}
				}
			case *ast.SelectorExpr:
				// C.type_t and fields: nothing to follow; the call case
				// above has already looked at a method call's name.
				ast.Inspect(x.X, func(n ast.Node) bool { return true })
				return !isC(x.X)
			case *ast.Ident:
				// A function called or referenced (errorStringFunc = nvmlErrorString).
				visitIdent(x.Name)
			}
			return true
		})
	}

	// Only the go-nvml interfaces the client names (nvml.Device, ...): a
	// method name alone is ambiguous (GetName is on Device and VgpuTypeId).
	// The client is its package and the packages below it (call, collect,
	// figure, ...): each of them may call NVML.
	var clientFiles []*ast.File
	for _, dir := range clientDirs {
		clientFiles = append(clientFiles, parseTree(t, dir)...)
	}
	used := map[reflect.Type]bool{
		reflect.TypeOf((*nvml.Interface)(nil)).Elem():         true,
		reflect.TypeOf((*nvml.ExtendedInterface)(nil)).Elem(): true,
	}
	for _, f := range clientFiles {
		ast.Inspect(f, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok {
				if id, ok := sel.X.(*ast.Ident); ok && id.Name == "nvml" {
					for _, impl := range implementations {
						if impl.iface.Name() == sel.Sel.Name {
							used[impl.iface] = true
						}
					}
				}
			}
			return true
		})
	}
	// ... and those the client gets back from a method it calls
	// (set, _ := lib.EventSetCreate() makes set an nvml.EventSet).
	called := map[string]bool{}
	for _, f := range clientFiles {
		ast.Inspect(f, func(n ast.Node) bool {
			if call, ok := n.(*ast.CallExpr); ok {
				if sel, ok := call.Fun.(*ast.SelectorExpr); ok {
					called[sel.Sel.Name] = true
				}
			}
			return true
		})
	}
	for changed := true; changed; {
		changed = false
		for _, impl := range implementations {
			if !used[impl.iface] {
				continue
			}
			for name := range called {
				m, ok := impl.iface.MethodByName(name)
				if !ok {
					continue
				}
				for i := 0; i < m.Type.NumOut(); i++ {
					for _, other := range implementations {
						if other.iface == m.Type.Out(i) && !used[other.iface] {
							used[other.iface], changed = true, true
						}
					}
				}
			}
		}
	}
	// Every NVML symbol name the client spells out: it looks them up
	// (LookupSymbol, directly or from a table) and calls them when present,
	// so the library must have them as the real one does.
	for _, f := range clientFiles {
		ast.Inspect(f, func(n ast.Node) bool {
			if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
				if s, err := strconv.Unquote(lit.Value); err == nil && symbolName.MatchString(s) {
					required[s] = true
				}
			}
			return true
		})
	}
	// A method expression (nvml.Device.GetPowerUsage) is a getter the
	// client calls.
	for _, f := range clientFiles {
		ast.Inspect(f, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok {
				if x, ok := sel.X.(*ast.SelectorExpr); ok {
					if id, ok := x.X.(*ast.Ident); ok && id.Name == "nvml" && x.Sel.Name == "Device" {
						visit(methods["nvmlDevice"][sel.Sel.Name])
					}
				}
			}
			return true
		})
	}
	for _, f := range clientFiles {
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			name := sel.Sel.Name
			for _, impl := range implementations {
				if used[impl.iface] && methodNames(impl.iface)[name] {
					visit(methods[impl.typ][name])
				}
			}
			return true
		})
	}
	return required
}
