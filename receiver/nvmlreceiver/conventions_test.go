package nvmlreceiver

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/semconv/v1.43.0/containerconv"
	"go.opentelemetry.io/otel/semconv/v1.43.0/hwconv"
	"go.opentelemetry.io/otel/semconv/v1.43.0/k8sconv"
	"go.opentelemetry.io/otel/semconv/v1.43.0/processconv"
	"gopkg.in/yaml.v3"
)

// This file holds metadata.yaml to the OpenTelemetry semantic conventions
// of sem_conv_version, as the Go constants of go.opentelemetry.io/otel's
// semconv packages state them:
//
//   - every metric or attribute whose name is in the registry has the
//     registry's unit, instrument kind, value type and (for enums) values;
//   - every other name starts with nvidia. and shadows no registry name;
//   - units make honest Prometheus names: "1" only for a double gauge (a
//     ratio) or the hw.status pattern, counts in {braces}.
//
// The registry's metrics and attributes are read from the semconv
// packages' Go source (their Name(), Unit() methods, instrument types,
// attribute keys and enum values), so that a new name is checked without
// anyone listing it here; emittedInstruments cross-checks that reading
// against the compiled constants.

// semconvPackages are the registry namespaces a GPU receiver can touch.
var semconvPackages = []string{
	"go.opentelemetry.io/otel/semconv/v1.43.0/hwconv",
	"go.opentelemetry.io/otel/semconv/v1.43.0/processconv",
	"go.opentelemetry.io/otel/semconv/v1.43.0/containerconv",
	"go.opentelemetry.io/otel/semconv/v1.43.0/k8sconv",
}

const semconvRoot = "go.opentelemetry.io/otel/semconv/v1.43.0"

// semconvInstrument is what every generated semconv metric type offers.
type semconvInstrument interface {
	Name() string
	Unit() string
	Description() string
}

// emittedInstruments are the registry metrics metadata.yaml uses, as
// compiled types: the parsed registry must agree with them.
var emittedInstruments = []semconvInstrument{
	hwconv.Energy{}, hwconv.Errors{}, hwconv.GpuIO{}, hwconv.GpuMemoryLimit{}, hwconv.GpuMemoryUsage{},
	hwconv.GpuMemoryUtilization{}, hwconv.GpuUtilization{}, hwconv.Power{}, hwconv.Status{}, hwconv.Temperature{},
	// Not emitted, but names a custom metric must not shadow.
	hwconv.FanSpeed{}, processconv.MemoryUsage{}, containerconv.MemoryUsage{}, k8sconv.PodMemoryUsage{},
}

// instrument is a metric's kind and value type, in metadata.yaml's terms.
type instrument struct {
	kind      string // gauge, sum, sum_monotonic, histogram
	valueType string // int, double
}

func (i instrument) String() string { return i.kind + "/" + i.valueType }

type registryMetric struct {
	name, unit string
	inst       instrument // as the Go type declares it
}

type registryAttribute struct {
	name      string
	valueType string   // string, int, double, boolean, string[], ...
	enum      []string // the enum's values; empty when not an enum
}

type registry struct {
	metrics    map[string]registryMetric
	attributes map[string]registryAttribute
}

// has reports whether name is a registry metric or attribute.
func (r registry) has(name string) bool {
	_, m := r.metrics[name]
	_, a := r.attributes[name]
	return m || a
}

// instrumentOf maps a go.opentelemetry.io/otel/metric instrument type name
// (Int64Counter, Float64ObservableGauge, ...) to its kind and value type.
func instrumentOf(typeName string) (instrument, error) {
	var i instrument
	rest, ok := strings.CutPrefix(typeName, "Int64")
	if ok {
		i.valueType = "int"
	} else if rest, ok = strings.CutPrefix(typeName, "Float64"); ok {
		i.valueType = "double"
	} else {
		return i, fmt.Errorf("instrument type %q", typeName)
	}
	switch strings.TrimPrefix(rest, "Observable") {
	case "Counter":
		i.kind = "sum_monotonic"
	case "UpDownCounter":
		i.kind = "sum"
	case "Gauge":
		i.kind = "gauge"
	case "Histogram":
		i.kind = "histogram"
	default:
		return i, fmt.Errorf("instrument type %q", typeName)
	}
	return i, nil
}

// packageDirs finds the packages' sources through the go command, which
// the test runs under anyway, in one call.
func packageDirs(t *testing.T, pkgs ...string) map[string]string {
	t.Helper()
	out, err := exec.Command("go", append([]string{"list", "-f", "{{.ImportPath}} {{.Dir}}"}, pkgs...)...).Output()
	require.NoError(t, err, "go list %s", pkgs)
	dirs := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if pkg, dir, ok := strings.Cut(line, " "); ok {
			dirs[pkg] = dir
		}
	}
	return dirs
}

// parseDirs parses the Go files of each directory, every file on a
// goroutine of its own: the semconv sources are over a megabyte.
func parseDirs(t *testing.T, dirs ...string) map[string][]*ast.File {
	t.Helper()
	type parsed struct {
		dir string
		f   *ast.File
		err error
	}
	fset := token.NewFileSet()
	results := make(chan parsed)
	n := 0
	for _, dir := range dirs {
		entries, err := os.ReadDir(dir)
		require.NoError(t, err)
		for _, e := range entries {
			if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
				continue
			}
			n++
			go func() {
				var f *ast.File
				src, err := os.ReadFile(filepath.Join(dir, e.Name()))
				if err == nil {
					f, err = parser.ParseFile(fset, filepath.Join(dir, e.Name()), skimGo(src), parser.ParseComments|parser.SkipObjectResolution)
				}
				results <- parsed{dir, f, err}
			}()
		}
	}
	out := map[string][]*ast.File{}
	for range n {
		r := <-results
		require.NoError(t, r.err)
		out[r.dir] = append(out[r.dir], r.f)
	}
	return out
}

// skimGo keeps of a generated semconv file what the registry is read
// from: its type, const and var declarations and the Name and Unit
// methods, with their comments. The rest (constructors, recording methods)
// is most of the source and is never read; parsing it would be most of
// these tests' time.
func skimGo(src []byte) []byte {
	var out, comments []byte
	keep := true
	for _, line := range bytes.SplitAfter(src, []byte("\n")) {
		switch {
		case bytes.HasPrefix(line, []byte("//")):
			comments = append(comments, line...)
			continue
		case bytes.HasPrefix(line, []byte("func ")):
			keep = bytes.Contains(line, []byte(") Name() string")) || bytes.Contains(line, []byte(") Unit() string"))
		case bytes.HasPrefix(line, []byte("package ")), bytes.HasPrefix(line, []byte("import")),
			bytes.HasPrefix(line, []byte("type ")), bytes.HasPrefix(line, []byte("const ")), bytes.HasPrefix(line, []byte("var ")):
			keep = true
		}
		if keep {
			out = append(append(out, comments...), line...)
		}
		comments = comments[:0]
	}
	return out
}

// returnedString is the string literal of a one-statement `return "x"`.
func returnedString(fn *ast.FuncDecl) (string, bool) {
	if fn.Body == nil || len(fn.Body.List) != 1 {
		return "", false
	}
	ret, ok := fn.Body.List[0].(*ast.ReturnStmt)
	if !ok || len(ret.Results) != 1 {
		return "", false
	}
	lit, ok := ret.Results[0].(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return "", false
	}
	s, err := strconv.Unquote(lit.Value)
	return s, err == nil
}

// parseMetrics reads a semconv metric package: each instrument type T
// embeds metric.<Instrument> and has `func (T) Name()` and `Unit()`.
func parseMetrics(t *testing.T, files []*ast.File, into map[string]registryMetric) {
	t.Helper()
	type found struct {
		name, unit string
		inst       string
	}
	byType := map[string]*found{}
	get := func(typ string) *found {
		if byType[typ] == nil {
			byType[typ] = &found{}
		}
		return byType[typ]
	}
	for _, f := range files {
		for _, decl := range f.Decls {
			switch d := decl.(type) {
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					ts, ok := spec.(*ast.TypeSpec)
					if !ok {
						continue
					}
					st, ok := ts.Type.(*ast.StructType)
					if !ok || len(st.Fields.List) == 0 || len(st.Fields.List[0].Names) != 0 {
						continue
					}
					if sel, ok := st.Fields.List[0].Type.(*ast.SelectorExpr); ok {
						if x, ok := sel.X.(*ast.Ident); ok && x.Name == "metric" {
							get(ts.Name.Name).inst = sel.Sel.Name
						}
					}
				}
			case *ast.FuncDecl:
				if d.Recv == nil || len(d.Recv.List) != 1 {
					continue
				}
				recv, ok := d.Recv.List[0].Type.(*ast.Ident)
				if !ok {
					continue
				}
				if v, ok := returnedString(d); ok {
					switch d.Name.Name {
					case "Name":
						get(recv.Name).name = v
					case "Unit":
						get(recv.Name).unit = v
					}
				}
			}
		}
	}
	// The synchronous type is the reference; an Observable twin only fills
	// in a name that has none.
	for _, observable := range []bool{false, true} {
		for typ, f := range byType {
			if f.name == "" || f.inst == "" || strings.Contains(typ, "Observable") != observable {
				continue
			}
			inst, err := instrumentOf(f.inst)
			require.NoError(t, err, "%s", typ)
			if _, dup := into[f.name]; !dup {
				into[f.name] = registryMetric{name: f.name, unit: f.unit, inst: inst}
			}
		}
	}
}

var attrTypeComment = regexp.MustCompile(`(?m)^\s*Type: (\S+)\s*$`)

// parseAttributes reads the registry's attribute keys
// (`XKey = attribute.Key("x")`, with a "Type: ..." doc line) and enum
// values (`XValue = XKey.String("v")`).
func parseAttributes(t *testing.T, files []*ast.File) map[string]registryAttribute {
	t.Helper()
	keys := map[string]string{}  // Go ident -> attribute name
	types := map[string]string{} // Go ident -> declared type
	enums := map[string][]string{}
	enumTypes := map[string]string{}
	for _, f := range files {
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok {
				continue
			}
			for _, spec := range gd.Specs {
				vs, ok := spec.(*ast.ValueSpec)
				if !ok || len(vs.Names) != 1 || len(vs.Values) != 1 {
					continue
				}
				call, ok := vs.Values[0].(*ast.CallExpr)
				if !ok || len(call.Args) != 1 {
					continue
				}
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if !ok {
					continue
				}
				lit, ok := call.Args[0].(*ast.BasicLit)
				if !ok {
					continue
				}
				x, ok := sel.X.(*ast.Ident)
				if !ok {
					continue
				}
				switch {
				case x.Name == "attribute" && sel.Sel.Name == "Key" && lit.Kind == token.STRING:
					name, _ := strconv.Unquote(lit.Value)
					keys[vs.Names[0].Name] = name
					if vs.Doc != nil {
						if m := attrTypeComment.FindStringSubmatch(vs.Doc.Text()); m != nil {
							types[vs.Names[0].Name] = m[1]
						}
					}
				case strings.HasSuffix(x.Name, "Key"):
					v := lit.Value
					if lit.Kind == token.STRING {
						v, _ = strconv.Unquote(lit.Value)
					}
					enums[x.Name] = append(enums[x.Name], v)
					enumTypes[x.Name] = map[string]string{"String": "string", "Int": "int", "Int64": "int"}[sel.Sel.Name]
				}
			}
		}
	}
	out := map[string]registryAttribute{}
	for ident, name := range keys {
		a := registryAttribute{name: name, valueType: types[ident], enum: enums[ident]}
		if strings.EqualFold(a.valueType, "enum") || a.valueType == "" && len(a.enum) > 0 {
			a.valueType = enumTypes[ident]
		}
		out[name] = a
	}
	return out
}

// theRegistry is read once for the tests that need it: parsing the
// semconv sources is most of their time.
var theRegistry struct {
	once sync.Once
	r    registry
}

func loadRegistry(t *testing.T) registry {
	t.Helper()
	theRegistry.once.Do(func() {
		r := registry{metrics: map[string]registryMetric{}}
		pkgs := append([]string{semconvRoot}, semconvPackages...)
		dirs := packageDirs(t, pkgs...)
		files := parseDirs(t, slices.Collect(maps.Values(dirs))...)
		for _, pkg := range semconvPackages {
			parseMetrics(t, files[dirs[pkg]], r.metrics)
		}
		r.attributes = parseAttributes(t, files[dirs[semconvRoot]])
		theRegistry.r = r
	})
	r := theRegistry.r
	require.Greater(t, len(r.metrics), 100, "the registry's metrics were read")
	require.Greater(t, len(r.attributes), 500, "the registry's attributes were read")
	return r
}

// ---- metadata.yaml ------------------------------------------------------------

type mdAttribute struct {
	Type string   `yaml:"type"`
	Enum []string `yaml:"enum"`
}

type mdMetric struct {
	Unit  string `yaml:"unit"`
	Gauge *struct {
		ValueType string `yaml:"value_type"`
	} `yaml:"gauge"`
	Sum *struct {
		ValueType string `yaml:"value_type"`
		Monotonic bool   `yaml:"monotonic"`
	} `yaml:"sum"`
	Histogram *struct {
		ValueType string `yaml:"value_type"`
	} `yaml:"histogram"`
	Attributes []string `yaml:"attributes"`
}

func (m mdMetric) instrument() instrument {
	switch {
	case m.Gauge != nil:
		return instrument{"gauge", m.Gauge.ValueType}
	case m.Sum != nil && m.Sum.Monotonic:
		return instrument{"sum_monotonic", m.Sum.ValueType}
	case m.Sum != nil:
		return instrument{"sum", m.Sum.ValueType}
	case m.Histogram != nil:
		return instrument{"histogram", m.Histogram.ValueType}
	}
	return instrument{}
}

type metadataFile struct {
	SemConvVersion     string                 `yaml:"sem_conv_version"`
	ResourceAttributes map[string]mdAttribute `yaml:"resource_attributes"`
	Attributes         map[string]mdAttribute `yaml:"attributes"`
	Metrics            map[string]mdMetric    `yaml:"metrics"`
	Events             map[string]struct {
		Attributes []string `yaml:"attributes"`
	} `yaml:"events"`
}

// clone copies md deeply enough for a test to change any of it.
func (md metadataFile) clone() metadataFile {
	out := md
	cloneAttributes := func(in map[string]mdAttribute) map[string]mdAttribute {
		c := make(map[string]mdAttribute, len(in))
		for k, a := range in {
			a.Enum = slices.Clone(a.Enum)
			c[k] = a
		}
		return c
	}
	out.ResourceAttributes = cloneAttributes(md.ResourceAttributes)
	out.Attributes = cloneAttributes(md.Attributes)
	out.Events = maps.Clone(md.Events)
	out.Metrics = make(map[string]mdMetric, len(md.Metrics))
	for name, m := range md.Metrics {
		if m.Gauge != nil {
			g := *m.Gauge
			m.Gauge = &g
		}
		if m.Sum != nil {
			sum := *m.Sum
			m.Sum = &sum
		}
		if m.Histogram != nil {
			h := *m.Histogram
			m.Histogram = &h
		}
		m.Attributes = slices.Clone(m.Attributes)
		out.Metrics[name] = m
	}
	return out
}

func readMetadataFile(t *testing.T) metadataFile {
	t.Helper()
	raw, err := os.ReadFile("metadata.yaml")
	require.NoError(t, err)
	var md metadataFile
	require.NoError(t, yaml.Unmarshal(raw, &md))
	require.NotEmpty(t, md.Metrics)
	return md
}

// ---- the rules ----------------------------------------------------------------

// physicalUnits are the UCUM units a GPU metric may carry besides ratios
// ("1") and counts ({thing}).
var physicalUnits = map[string]bool{"By": true, "s": true, "J": true, "W": true, "Cel": true, "Hz": true, "By/s": true}

// continuousUnits are quantities this receiver reports as doubles even where
// the Go generator's default instrument is Int64: NVML reads them finer than
// the unit (mW, mJ) or the convention's own examples are fractional.
var continuousUnits = map[string]bool{"J": true, "W": true, "Cel": true, "s": true, "By/s": true}

var countUnit = regexp.MustCompile(`^\{[a-z][a-z_]*\}$`)

// expectedValueType is the value type the conventions give a registry
// metric. The registry itself states units and instruments; the value type
// in the Go constants is its generator's default (Int64 for every unit but
// s and ms; the generator overrides it, for example, to Float64 for
// system.memory.utilization). So: Float64 where the Go type says so; double
// for a gauge of unit "1", a fraction, which an int would truncate to 0 or
// 1; double for continuous physical quantities; int otherwise.
func expectedValueType(r registryMetric) string {
	switch {
	case r.inst.valueType == "double",
		r.inst.kind == "gauge" && r.unit == "1",
		continuousUnits[r.unit]:
		return "double"
	}
	return "int"
}

// isStatusPattern reports whether m follows hw.status: a non-monotonic int
// sum of unit 1, one series per value of its single enum attribute, 1 for
// the current one.
func isStatusPattern(m mdMetric, attrs map[string]mdAttribute) bool {
	inst := m.instrument()
	if inst.kind != "sum" || inst.valueType != "int" || len(m.Attributes) != 1 {
		return false
	}
	return len(attrs[m.Attributes[0]].Enum) > 1
}

// ownerNamesAhead are owner attributes named as the conventions name every
// Kubernetes object (k8s.<kind>.name, as k8s.resourcequota.name), for an
// object they have no attribute for yet: the DRA ResourceClaim a GPU is
// allocated through. An owner under nvidia. would split one owner across
// two namespaces of names.
var ownerNamesAhead = []string{"k8s.resourceclaim.name"}

// customNameProblem says what is wrong with a name that is not in the
// registry: it must be a vendor name, and must not shadow a registry name
// (nvidia.X beside X, or nvidia.gpu.X beside hw.gpu.X).
//
// Slurm's own attributes (slurm.job.*) go under its name, as a cloud's go
// under its own (gcp.cloud_run.job.*): the registry has no batch or HPC job.
func customNameProblem(name string, reg registry) string {
	if strings.HasPrefix(name, "slurm.") {
		return ""
	}
	if slices.Contains(ownerNamesAhead, name) {
		if reg.has(name) {
			return fmt.Sprintf("%s: now in the registry; drop it from ownerNamesAhead", name)
		}
		return ""
	}
	rest, ok := strings.CutPrefix(name, "nvidia.")
	if !ok {
		return fmt.Sprintf("%s: not in semconv %s and not under nvidia.", name, semconvVersion())
	}
	for _, shadowed := range []string{rest, "hw." + rest} {
		if reg.has(shadowed) {
			return fmt.Sprintf("%s: shadows the registry's %s; use the registry name", name, shadowed)
		}
	}
	return ""
}

func semconvVersion() string {
	return strings.TrimPrefix(semconv.SchemaURL, "https://opentelemetry.io/schemas/")
}

// conventionProblems returns every way md departs from the conventions.
func conventionProblems(md metadataFile, reg registry) []string {
	var out []string
	add := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }

	if md.SemConvVersion != semconvVersion() {
		add("sem_conv_version %q, but the conventions checked are %s", md.SemConvVersion, semconvVersion())
	}
	for name, m := range md.Metrics {
		inst := m.instrument()
		if r, ok := reg.metrics[name]; ok {
			if m.Unit != r.unit {
				add("%s: unit %q, the convention says %q", name, m.Unit, r.unit)
			}
			if inst.kind != r.inst.kind {
				add("%s: a %s, the convention says %s (Go %s)", name, inst.kind, r.inst.kind, r.inst)
			}
			if want := expectedValueType(r); inst.valueType != want {
				add("%s: value type %s, the convention says %s", name, inst.valueType, want)
			}
		} else if p := customNameProblem(name, reg); p != "" {
			add("metric %s", p)
		}
		switch {
		case m.Unit == "1":
			if !(inst.kind == "gauge" && inst.valueType == "double") && !isStatusPattern(m, md.Attributes) {
				add("%s: unit 1 is for ratios (double gauges) and the hw.status pattern; a %s is neither", name, inst)
			}
		case countUnit.MatchString(m.Unit), physicalUnits[m.Unit]:
		case reg.metrics[name].unit == m.Unit && m.Unit != "":
			// a registry metric's own unit (rpm, V, ...)
		default:
			add("%s: unit %q is neither a ratio, a {count} nor one of %v", name, m.Unit, slices.Sorted(maps.Keys(physicalUnits)))
		}
		if inst.valueType == "int" && m.Unit == "1" && !isStatusPattern(m, md.Attributes) {
			add("%s: an int with unit 1 reads as a ratio in Prometheus (_ratio)", name)
		}
	}
	checkAttrs := func(kind string, attrs map[string]mdAttribute) {
		for name, a := range attrs {
			r, ok := reg.attributes[name]
			if !ok {
				if p := customNameProblem(name, reg); p != "" {
					add("%s %s", kind, p)
				}
				continue
			}
			if want := map[string]string{"string": "string", "int": "int", "double": "double", "bool": "boolean"}[a.Type]; want != r.valueType {
				add("%s %s: type %s, the convention says %s", kind, name, a.Type, r.valueType)
			}
			if closed := slices.DeleteFunc(slices.Clone(r.enum), func(v string) bool { return v == "_OTHER" }); len(a.Enum) > 0 && len(closed) > 0 {
				for _, v := range a.Enum {
					if !slices.Contains(r.enum, v) {
						add("%s %s: value %q is not one of the convention's %v", kind, name, v, r.enum)
					}
				}
			}
		}
	}
	checkAttrs("resource attribute", md.ResourceAttributes)
	checkAttrs("attribute", md.Attributes)
	slices.Sort(out)
	return out
}

// ---- tests --------------------------------------------------------------------

func TestMetadataFollowsSemanticConventions(t *testing.T) {
	t.Parallel()
	reg := loadRegistry(t)
	md := readMetadataFile(t)
	assert.Empty(t, conventionProblems(md, reg))

	// The names this receiver takes from the registry are really there.
	var fromRegistry []string
	for name := range md.Metrics {
		if _, ok := reg.metrics[name]; ok {
			fromRegistry = append(fromRegistry, name)
		}
	}
	assert.Subset(t, fromRegistry, []string{"hw.gpu.utilization", "hw.gpu.memory.utilization", "hw.gpu.memory.usage",
		"hw.gpu.memory.limit", "hw.gpu.io", "hw.temperature", "hw.power", "hw.energy", "hw.errors", "hw.status"})
	for _, a := range []string{"hw.id", "hw.parent", "hw.sensor_location", "hw.state", "hw.gpu.task", "process.pid",
		"process.executable.name", "process.owner", "process.creation.time", "container.id", "k8s.pod.uid"} {
		assert.True(t, reg.has(a), "%s is a registry attribute", a)
	}
}

// TestRegistryReadingMatchesTheCompiledConstants: the source reading agrees
// with the compiled semconv types (names, units, instrument types).
func TestRegistryReadingMatchesTheCompiledConstants(t *testing.T) {
	t.Parallel()
	reg := loadRegistry(t)
	for _, c := range emittedInstruments {
		r, ok := reg.metrics[c.Name()]
		if !assert.True(t, ok, "%s not read from the source", c.Name()) {
			continue
		}
		assert.Equal(t, c.Unit(), r.unit, c.Name())
		embedded := reflect.TypeOf(c).Field(0).Type.Name()
		inst, err := instrumentOf(embedded)
		require.NoError(t, err)
		assert.Equal(t, inst, r.inst, c.Name())
	}
	for key, want := range map[string]string{
		string(semconv.HwIDKey): "string", string(semconv.ProcessPIDKey): "int", string(semconv.HwStateKey): "string",
		string(semconv.ProcessCreationTimeKey): "string", string(semconv.HwSensorLocationKey): "string",
	} {
		assert.Equal(t, want, reg.attributes[key].valueType, key)
	}
	assert.Contains(t, reg.attributes[string(semconv.HwStateKey)].enum, semconv.HwStatePredictedFailure.Value.AsString())
	assert.ElementsMatch(t, []string{string(hwconv.GpuTaskGeneral), string(hwconv.GpuTaskEncoder), string(hwconv.GpuTaskDecoder)},
		reg.attributes[string(semconv.HwGpuTaskKey)].enum)
}

// TestConventionsCheckCatchesMistakes: the check fails on the mistakes it
// exists for, each introduced into a copy of metadata.yaml.
func TestConventionsCheckCatchesMistakes(t *testing.T) {
	t.Parallel()
	reg := loadRegistry(t)
	declared := readMetadataFile(t)
	for name, tc := range map[string]struct {
		change func(md *metadataFile)
		want   string
	}{
		"a convention name with the wrong unit": {func(md *metadataFile) {
			m := md.Metrics["hw.gpu.io"]
			m.Unit = "KiBy"
			md.Metrics["hw.gpu.io"] = m
		}, `hw.gpu.io: unit "KiBy", the convention says "By"`},
		"a new convention metric with the wrong unit": {func(md *metadataFile) {
			md.Metrics["hw.fan.speed"] = mdMetric{Unit: "1", Gauge: &struct {
				ValueType string `yaml:"value_type"`
			}{"double"}}
		}, `hw.fan.speed: unit "1", the convention says "rpm"`},
		"a convention name of the wrong kind": {func(md *metadataFile) {
			m := md.Metrics["hw.gpu.memory.usage"]
			m.Gauge, m.Sum = &struct {
				ValueType string `yaml:"value_type"`
			}{"int"}, nil
			md.Metrics["hw.gpu.memory.usage"] = m
		}, "hw.gpu.memory.usage: a gauge, the convention says sum"},
		"a convention name of the wrong value type": {func(md *metadataFile) {
			m := md.Metrics["hw.temperature"]
			m.Gauge.ValueType = "int"
			md.Metrics["hw.temperature"] = m
		}, "hw.temperature: value type int, the convention says double"},
		"a vendor name that shadows the registry": {func(md *metadataFile) {
			md.Metrics["nvidia.gpu.memory.utilization"] = md.Metrics["nvidia.gpu.memory.controller.utilization"]
		}, "shadows the registry's hw.gpu.memory.utilization"},
		"a custom name outside nvidia.": {func(md *metadataFile) {
			md.Metrics["gpu.fan.speed"] = md.Metrics["nvidia.gpu.fan.speed"]
		}, "gpu.fan.speed: not in semconv"},
		"an int gauge with unit 1": {func(md *metadataFile) {
			m := md.Metrics["nvidia.gpu.performance_state"]
			m.Unit = "1"
			md.Metrics["nvidia.gpu.performance_state"] = m
		}, "nvidia.gpu.performance_state: unit 1 is for ratios"},
		"a count without braces": {func(md *metadataFile) {
			m := md.Metrics["nvidia.gpu.pcie.replays"]
			m.Unit = "replays"
			md.Metrics["nvidia.gpu.pcie.replays"] = m
		}, `nvidia.gpu.pcie.replays: unit "replays" is neither`},
		"a value outside a closed enum": {func(md *metadataFile) {
			a := md.Attributes["hw.state"]
			a.Enum = append(slices.Clone(a.Enum), "throttled")
			md.Attributes["hw.state"] = a
		}, `attribute hw.state: value "throttled"`},
		"a registry attribute of the wrong type": {func(md *metadataFile) {
			a := md.ResourceAttributes["process.pid"]
			a.Type = "string"
			md.ResourceAttributes["process.pid"] = a
		}, "resource attribute process.pid: type string, the convention says int"},
		"a stale sem_conv_version": {func(md *metadataFile) { md.SemConvVersion = "1.26.0" },
			`sem_conv_version "1.26.0"`},
	} {
		t.Run(name, func(t *testing.T) {
			md := declared.clone() // a copy of its own
			tc.change(&md)
			problems := conventionProblems(md, reg)
			assert.True(t, slices.ContainsFunc(problems, func(p string) bool { return strings.Contains(p, tc.want) }),
				"want a problem containing %q, got %q", tc.want, problems)
		})
	}
}
