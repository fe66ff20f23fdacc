package docs

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-nvml/otelcol-nvml/tools/metricstable/table"
)

// A plain metric is a gauge (or counter) read from one NVML getter or
// field: a metadata.yaml metric whose Record method appears in the
// receiver's plainReadings table. Issue 35: it is declared once. Its
// hand-edited places are these three (the recipe of
// docs/design/architecture.md lists them, and TestAddAMetricRecipe holds
// the two to each other); everything else that names it is generated.
const (
	metadataFile = "receiver/nvmlreceiver/metadata.yaml"
	// plainReadingsPlace stands for the file that declares plainReadings,
	// found by its declaration wherever it lives under receiver/.
	plainReadingsPlace = "plainReadings"
	gettersFile        = "test/nvmltest/getters.json"
)

// handEdited are the places a new plain metric is written by hand: its
// metadata.yaml entry, its plainReadings rows, and its getter's simulated
// value when the getter is new to the simulators.
var handEdited = []string{metadataFile, plainReadingsPlace, gettersFile}

// namedInDocs are older plain metrics that dashboards, alert rules and
// docs read by name: for them the check covers code only (Go and C
// sources outside generated files, hand-written tests among them). A
// metric added since issue 35 is not here: any hand-written file that
// names it fails the test.
var namedInDocs = func() map[string]string {
	m := map[string]string{}
	for _, name := range append(oldClockPowerThermal, "nvidia.gpu.nvlink.ber", "nvidia.gpu.temperature.margin") {
		m[name] = "read by the dashboards, rules or docs before issue 35"
	}
	return m
}()

// allowance lets the hand-written files that file names (a path, or
// prefix/**/base for any base of that name under prefix, which survives a
// move of the receiver's files into packages) name metrics, for reason.
type allowance struct {
	file    string
	metrics []string
	reason  string
}

func (a allowance) matches(rel string) bool {
	prefix, base, ok := strings.Cut(a.file, "**/")
	if !ok {
		return rel == a.file
	}
	return strings.HasPrefix(rel, prefix) && path.Base(rel) == base
}

// Sets of older metrics, for the allowances.
var (
	oldClockPowerThermal = []string{"hw.energy", "hw.power", "hw.temperature", "nvidia.gpu.clock.event.time", "nvidia.gpu.clock.frequency",
		"nvidia.gpu.fan.speed", "nvidia.gpu.nvlink.errors", "nvidia.gpu.pcie.link.generation", "nvidia.gpu.pcie.link.width",
		"nvidia.gpu.pcie.replays", "nvidia.gpu.pcie.throughput", "nvidia.gpu.performance_state", "nvidia.gpu.power.limit"}
	// issue35Metrics were added as plain metrics: the recipe's proof.
	issue35Metrics = []string{"nvidia.gpu.clock.max_frequency", "nvidia.gpu.pcie.link.max_generation", "nvidia.gpu.pcie.link.max_width"}
)

// allowed are the hand-written files that may name a plain metric, each
// with its reason. For the metrics of issue 35 only the optional H200
// check against nvidia-smi (12dd520), which a new metric does not need.
var allowed = []allowance{
	// The H200 check (tools/h200, docs/runs/h200-runs.md): the collector's
	// figures against nvidia-smi's on a real GPU; optional, run by hand.
	{"tools/h200/compare.py", issue35Metrics, "the H200 check compares these to nvidia-smi's clocks.max.* and pcie.link.*.max"},
	{"tools/h200/compare_test.py", issue35Metrics, "compare.py's test on synthetic inputs"},
	{"testdata/collector/h200-check.yaml", issue35Metrics[:2], "the H200 check's collector config turns the static limits on the fast cadence"},
	// Older metrics that product code names by hand (before issue 35).
	{"receiver/nvmlreceiver/**/config_keys.go", []string{"hw.energy", "hw.power", "hw.temperature", "nvidia.gpu.clock.event.time",
		"nvidia.gpu.clock.frequency", "nvidia.gpu.pcie.replays"}, "the DCGM field ids the receiver maps to its metrics"},
	{"receiver/nvmlreceiver/**/config.go", []string{"hw.energy", "nvidia.gpu.clock.event.time", "nvidia.gpu.pcie.replays"},
		"the counters' cadence setting names the metrics read on it"},
	{"receiver/nvmlreceiver/**/plain_record.go", []string{"hw.power"}, "a comment's example of a Record method and its field"},
	// Tests that check a metric specifically: conventions, identity,
	// health, the scrape, failures, the e2e suite, the image, the dashboard.
	{"internal/nvmlclient/**/faillog_test.go", []string{"hw.power"}, "a failure's log line names the read it failed"},
	{"receiver/nvmlreceiver/**/accounting_scrape_test.go", []string{"hw.energy"}, "the counters' cadence"},
	{"receiver/nvmlreceiver/**/config_test.go", []string{"nvidia.gpu.clock.frequency"}, "a metric turned off in config"},
	{"receiver/nvmlreceiver/**/conventions_test.go", []string{"hw.energy", "hw.power", "hw.temperature", "nvidia.gpu.fan.speed",
		"nvidia.gpu.pcie.replays", "nvidia.gpu.performance_state"}, "semantic conventions' names and units"},
	{"receiver/nvmlreceiver/**/counter_starts_test.go", []string{"hw.energy", "nvidia.gpu.nvlink.errors"}, "counters' start times"},
	{"receiver/nvmlreceiver/**/dependencies_test.go", []string{"hw.power"}, "an enabled metric's reads"},
	{"receiver/nvmlreceiver/**/faillog_test.go", []string{"hw.power", "hw.temperature"}, "a failing read's log line"},
	{"receiver/nvmlreceiver/**/health_test.go", []string{"nvidia.gpu.clock.event.time", "nvidia.gpu.pcie.link.generation",
		"nvidia.gpu.pcie.link.width", "nvidia.gpu.pcie.replays"}, "health figures"},
	{"receiver/nvmlreceiver/**/identity_test.go", []string{"hw.energy", "hw.power", "nvidia.gpu.clock.event.time",
		"nvidia.gpu.nvlink.errors", "nvidia.gpu.pcie.replays"}, "which resource a metric is on"},
	{"receiver/nvmlreceiver/**/lifecycle_test.go", []string{"hw.temperature"}, "a point across restarts"},
	{"receiver/nvmlreceiver/**/mig_test.go", []string{"hw.temperature"}, "a GPU metric absent on MIG devices"},
	{"receiver/nvmlreceiver/**/scraper_test.go", []string{"hw.energy", "hw.power", "hw.temperature", "nvidia.gpu.clock.event.time",
		"nvidia.gpu.clock.frequency", "nvidia.gpu.pcie.replays"}, "the scrape's values"},
	{"receiver/nvmlreceiver/**/plain_record_test.go", []string{"hw.power", "nvidia.gpu.clock.frequency"}, "the tests of the plain readings and the metrics' needs"},
	{"test/deploy/dashboard/dashboard.go", []string{"hw.energy", "hw.power", "hw.temperature", "nvidia.gpu.clock.event.time",
		"nvidia.gpu.clock.frequency", "nvidia.gpu.power.limit"}, "the Grafana dashboard's queries"},
	{"test/e2e/dcgmcompat_test.go", []string{"hw.energy"}, "the DCGM-compatible series"},
	{"test/e2e/demo_test.go", []string{"hw.temperature", "nvidia.gpu.performance_state"}, "the demo scenario's figures"},
	{"test/e2e/identity_test.go", []string{"hw.energy", "hw.power", "nvidia.gpu.clock.event.time", "nvidia.gpu.pcie.replays"}, "which resource a series is on"},
	{"test/e2e/logvolume_test.go", []string{"hw.power", "hw.temperature"}, "log lines of failing reads"},
	{"test/e2e/mig_test.go", []string{"hw.energy", "hw.power", "hw.temperature", "nvidia.gpu.power.limit"}, "GPU metrics absent on MIG devices"},
	{"test/e2e/pipeline_test.go", oldClockPowerThermal, "the simulated values end to end"},
	{"test/e2e/reload_test.go", []string{"hw.power"}, "a series across a reload"},
	{"test/e2e/soak_test.go", []string{"hw.energy", "hw.power", "hw.temperature", "nvidia.gpu.clock.event.time", "nvidia.gpu.clock.frequency",
		"nvidia.gpu.fan.speed", "nvidia.gpu.pcie.link.generation", "nvidia.gpu.pcie.link.width", "nvidia.gpu.pcie.replays",
		"nvidia.gpu.performance_state", "nvidia.gpu.power.limit"}, "every series present over a soak"},
	{"test/image/image_test.go", []string{"hw.power"}, "the image serves a series"},
}

// perScenario are getters whose simulated value is not a default but in
// the scenarios that need it (testdata/scenarios/*.json, a GPU's getters
// block): the test checks a scenario has it.
var perScenario = map[string]string{
	"nvmlDeviceGetMarginTemperature":        "the demo's thermal margin moves; a default GPU has none",
	"nvmlDeviceGetPcieThroughput(TX_BYTES)": "off by default (nvidia.gpu.pcie.throughput); the demo's GPU without GPM",
	"nvmlDeviceGetPcieThroughput(RX_BYTES)": "off by default (nvidia.gpu.pcie.throughput); the demo's GPU without GPM",
}

// self is this file: it names the metrics it checks.
const self = "test/docs/addmetric_test.go"

// skipDirs are never scanned: version control, build outputs and tools.
var skipDirs = map[string]bool{".git": true, "_build": true, ".bin": true, ".benchbins": true, "node_modules": true}

var (
	plainDecl     = regexp.MustCompile(`(?m)^var plainReadings\s*=`)
	recordMethod  = regexp.MustCompile(`\bRecord(\w+)DataPoint\b`)
	generatedMark = regexp.MustCompile(`(?m)^// Code generated .* DO NOT EDIT\.?$|Code generated by .* DO NOT EDIT`)
	genBase       = regexp.MustCompile(`(^generated_.*|_gen\.(go|c|h))$`)
	// A hand-written simulator function: defined (not the generic getters'
	// weak alias) in a C file of test/fakenvml other than the generated one.
	cFuncDef = regexp.MustCompile(`(?m)^nvmlReturn_t\s+(?:DECLDIR\s+)?(nvml\w+)\s*\(([^;{]*)\)\s*\{`)
)

// camel is mdatagen's identifier of a metric: nvidia.gpu.clock.max_frequency
// is NvidiaGpuClockMaxFrequency.
func camel(name string) string {
	var b strings.Builder
	for _, part := range strings.FieldsFunc(name, func(r rune) bool { return r == '.' || r == '_' }) {
		b.WriteString(strings.ToUpper(part[:1]) + part[1:])
	}
	return b.String()
}

// plainMetric is a plain metric and the tokens that name it.
type plainMetric struct {
	name, record, field, prom string
}

// named reports which of m's tokens text names, as whole words: the OTLP
// name (not as the prefix of a longer dotted name), the Record method, the
// MetricsConfig field and the Prometheus name.
func (m plainMetric) named(text string) []string {
	var out []string
	if containsWord(text, m.name, true) {
		out = append(out, m.name)
	}
	for _, id := range []string{m.record, m.field, m.prom} {
		if containsWord(text, id, false) {
			out = append(out, id)
		}
	}
	return out
}

func isIdent(c byte) bool {
	return c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

// containsWord reports whether word is in text with no identifier
// character on either side; dotted: nor a dot before it, nor a dot and an
// identifier character after it (hw.power is not in hw.power.limit).
func containsWord(text, word string, dotted bool) bool {
	for i := 0; ; {
		j := strings.Index(text[i:], word)
		if j < 0 {
			return false
		}
		s, e := i+j, i+j+len(word)
		before := s == 0 || !isIdent(text[s-1]) && !(dotted && text[s-1] == '.')
		after := e == len(text) || !isIdent(text[e]) &&
			!(dotted && text[e] == '.' && e+1 < len(text) && isIdent(text[e+1]))
		if before && after {
			return true
		}
		i = s + 1
	}
}

// generated reports whether rel is a generated file, or a file the
// declared places regenerate or record: mdatagen's output (generated_*,
// documentation.md, internal/metadata/testdata), the scraper goldens
// (testdata/**/*_expected.yaml, -update), the nvml.h generators' *_gen.*,
// any file marked "Code generated ... DO NOT EDIT", the CHANGELOG and the
// run records (docs/runs).
func generated(rel string, head []byte) bool {
	base := path.Base(rel)
	switch {
	case genBase.MatchString(base),
		strings.HasPrefix(rel, "receiver/") && base == "documentation.md",
		strings.Contains(rel, "/internal/metadata/testdata/"),
		strings.HasPrefix(rel, "receiver/") && strings.Contains(rel, "/testdata/") && strings.HasSuffix(base, "_expected.yaml"),
		rel == "CHANGELOG.md", strings.HasPrefix(rel, "docs/runs/"),
		generatedMark.Match(head):
		return true
	}
	return false
}

func isCode(rel string) bool {
	switch path.Ext(rel) {
	case ".go", ".c", ".h":
		return true
	}
	return false
}

// placesCheck is what checkPlainMetrics found.
type placesCheck struct {
	plainFile string
	metrics   []plainMetric
	getters   []string // the plain readings' getter keys
	problems  []string
}

func (c *placesCheck) problem(format string, args ...any) {
	c.problems = append(c.problems, fmt.Sprintf(format, args...))
}

// findPlainReadings is the one Go file under root/receiver that declares
// plainReadings with its rows.
func findPlainReadings(root string) (string, error) {
	var found []string
	err := filepath.WalkDir(filepath.Join(root, "receiver"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if plainDecl.Match(data) {
			rel, _ := filepath.Rel(root, p)
			found = append(found, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	if len(found) != 1 {
		return "", fmt.Errorf("want one file under receiver/ declaring `var plainReadings = ...`, found %v", found)
	}
	return found[0], nil
}

// checkPlainMetrics checks the repository at root: every hand-written file
// that names a plain metric is a declared place (or on allow, with a
// reason; for a metric of docs, only code is checked), and every plain
// reading's getter has its simulated value written once.
func checkPlainMetrics(root string, docs map[string]string, allow []allowance, scenario map[string]string) (*placesCheck, error) {
	c := &placesCheck{}
	md, err := os.ReadFile(filepath.Join(root, metadataFile))
	if err != nil {
		return nil, err
	}
	all, err := table.Parse(md)
	if err != nil {
		return nil, err
	}
	if c.plainFile, err = findPlainReadings(root); err != nil {
		return nil, err
	}
	src, err := os.ReadFile(filepath.Join(root, c.plainFile))
	if err != nil {
		return nil, err
	}
	records := map[string]bool{}
	for _, m := range recordMethod.FindAllStringSubmatch(string(src), -1) {
		records[m[1]] = true
	}
	for _, m := range all {
		if !records[camel(m.Name)] {
			continue
		}
		delete(records, camel(m.Name))
		prom, err := table.PrometheusName(m)
		if err != nil {
			return nil, err
		}
		c.metrics = append(c.metrics, plainMetric{name: m.Name, record: "Record" + camel(m.Name) + "DataPoint", field: camel(m.Name), prom: prom})
	}
	for r := range records {
		c.problem("%s: Record%sDataPoint is no metric of %s", c.plainFile, r, metadataFile)
	}
	if len(c.metrics) == 0 {
		c.problem("%s: no plain metric's Record method", c.plainFile)
	}
	plain := map[string]bool{}
	for _, m := range c.metrics {
		plain[m.name] = true
	}
	for name := range docs {
		if !plain[name] {
			c.problem("namedInDocs lists %s, which is no plain metric", name)
		}
	}
	for _, a := range allow {
		for _, name := range a.metrics {
			if !plain[name] {
				c.problem("allowed %s lists %s, which is no plain metric", a.file, name)
			}
		}
	}

	usedAllow := map[string]bool{}
	inDocs := map[string]bool{}
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != root && (skipDirs[d.Name()] || strings.HasPrefix(d.Name(), ".carry")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		if rel == metadataFile || rel == c.plainFile || rel == self {
			return nil
		}
		info, err := d.Info()
		if err != nil || info.Size() > 4<<20 {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		head := data[:min(len(data), 2048)]
		if bytes.IndexByte(data[:min(len(data), 8192)], 0) >= 0 || generated(rel, head) {
			return nil
		}
		text := string(data)
		if strings.Contains(text, table.StartMarker) {
			// The generated table is declared; the prose around it is not.
			if _, s, e, err := table.Block(text); err == nil {
				text = text[:s] + text[e:]
			}
		}
		for _, m := range c.metrics {
			tokens := m.named(text)
			if len(tokens) == 0 {
				continue
			}
			if _, ok := docs[m.name]; ok && !isCode(rel) {
				inDocs[m.name] = true
				continue
			}
			if i := allowedBy(allow, rel, m.name); i >= 0 {
				usedAllow[fmt.Sprint(i, m.name)] = true
				continue
			}
			c.problem("%s names the plain metric %s (%s): a plain metric is written in %s and %s only; "+
				"the rest is generated (make generate, the goldens' -update)", rel, m.name, strings.Join(tokens, ", "), metadataFile, c.plainFile)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for i, a := range allow {
		for _, name := range a.metrics {
			if !usedAllow[fmt.Sprint(i, name)] {
				c.problem("allowed %s: no such file names %s any more; drop it", a.file, name)
			}
		}
	}
	for name := range docs {
		if plain[name] && !inDocs[name] {
			c.problem("namedInDocs lists %s, which no doc, dashboard or rule names any more; drop it", name)
		}
	}

	// The getters' simulated values: a hand-written simulator function, or
	// a value in getters.json.
	keys, err := getterKeys(c.plainFile, src)
	if err != nil {
		return nil, err
	}
	c.getters = keys
	own, err := handWrittenSimulated(root)
	if err != nil {
		return nil, err
	}
	values := map[string]any{}
	if data, err := os.ReadFile(filepath.Join(root, gettersFile)); err == nil {
		if err := json.Unmarshal(data, &values); err != nil {
			return nil, fmt.Errorf("%s: %w", gettersFile, err)
		}
	} else if !os.IsNotExist(err) {
		return nil, err
	}
	scenarios := ""
	files, _ := filepath.Glob(filepath.Join(root, "testdata", "scenarios", "*.json"))
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		scenarios += string(data)
	}
	for k := range scenario {
		if !strings.Contains(scenarios, strconv.Quote(k)+":") {
			c.problem("perScenario lists %s, which no testdata/scenarios/*.json getters block has", k)
		}
	}
	for _, k := range keys {
		fn, _, _ := strings.Cut(k, "(")
		_, inJSON := values[k]
		if _, ok := scenario[k]; ok && !own[fn] && !inJSON {
			continue
		}
		switch {
		case own[fn] && inJSON:
			c.problem("%s: %s has both a hand-written simulator function (test/fakenvml) and a value in %s; keep one", c.plainFile, k, gettersFile)
		case !own[fn] && !inJSON:
			c.problem("%s: getter %s has no simulated value: add it to %s", c.plainFile, k, gettersFile)
		}
	}
	sort.Strings(c.problems)
	return c, nil
}

// allowedBy is the index of the allowance that lets rel name metric, or -1.
func allowedBy(allow []allowance, rel, metric string) int {
	for i, a := range allow {
		if a.matches(rel) {
			for _, m := range a.metrics {
				if m == metric {
					return i
				}
			}
		}
	}
	return -1
}

// handWrittenSimulated are the NVML functions that a C file of
// test/fakenvml defines by hand (not the generated generic getters).
func handWrittenSimulated(root string) (map[string]bool, error) {
	files, err := filepath.Glob(filepath.Join(root, "test", "fakenvml", "*.c"))
	if err != nil {
		return nil, err
	}
	own := map[string]bool{}
	for _, f := range files {
		if strings.HasSuffix(f, "_gen.c") {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		for _, m := range cFuncDef.FindAllStringSubmatch(string(data), -1) {
			own[m[1]] = true
		}
	}
	return own, nil
}

// getterKeys are the simulators' keys of the plain readings' getters:
// nvmlclient.Getter(nvml.Device.GetX) is nvmlDeviceGetX,
// nvmlclient.GetterOf(nvml.Device.GetX, sel, "SEL") nvmlDeviceGetX(SEL)
// (a selector name passed through a helper of the file is followed to its
// callers), and .Named("nvmlY") on either is nvmlY. Field reads are the
// GPU's field batch, which the simulators answer by hand.
func getterKeys(name string, src []byte) ([]string, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, name, src, 0)
	if err != nil {
		return nil, err
	}
	isGetter := func(call *ast.CallExpr) string {
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok {
			return ""
		}
		if pkg, ok := sel.X.(*ast.Ident); !ok || pkg.Name != "nvmlclient" {
			return ""
		}
		if sel.Sel.Name == "Getter" || sel.Sel.Name == "GetterOf" {
			return sel.Sel.Name
		}
		return ""
	}
	str := func(e ast.Expr) (string, bool) {
		lit, ok := e.(*ast.BasicLit)
		if !ok || lit.Kind != token.STRING {
			return "", false
		}
		s, err := strconv.Unquote(lit.Value)
		return s, err == nil
	}
	// .Named("...") on a getter's chain names it.
	named := map[*ast.CallExpr]string{}
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok || sel.Sel.Name != "Named" || len(call.Args) != 1 {
			return true
		}
		s, ok := str(call.Args[0])
		if !ok {
			return true
		}
		for x := sel.X; ; {
			inner, ok := x.(*ast.CallExpr)
			if !ok {
				break
			}
			if isGetter(inner) != "" {
				named[inner] = s
				break
			}
			isel, ok := inner.Fun.(*ast.SelectorExpr)
			if !ok {
				break
			}
			x = isel.X
		}
		return true
	})
	// callersArgs: the string literals passed as argument i of function fn.
	callersArgs := func(fn string, i int) []string {
		var out []string
		ast.Inspect(f, func(n ast.Node) bool {
			if call, ok := n.(*ast.CallExpr); ok {
				if id, ok := call.Fun.(*ast.Ident); ok && id.Name == fn && i < len(call.Args) {
					if s, ok := str(call.Args[i]); ok {
						out = append(out, s)
					}
				}
			}
			return true
		})
		return out
	}
	var keys []string
	var problems []string
	for _, decl := range f.Decls {
		fd, _ := decl.(*ast.FuncDecl)
		params := map[string]int{}
		if fd != nil {
			i := 0
			for _, field := range fd.Type.Params.List {
				for _, n := range field.Names {
					params[n.Name] = i
					i++
				}
				if len(field.Names) == 0 {
					i++
				}
			}
		}
		ast.Inspect(decl, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			kind := isGetter(call)
			if kind == "" {
				return true
			}
			if s, ok := named[call]; ok {
				keys = append(keys, s)
				return true
			}
			fn := ""
			if len(call.Args) > 0 {
				if sel, ok := call.Args[0].(*ast.SelectorExpr); ok {
					if dev, ok := sel.X.(*ast.SelectorExpr); ok && dev.Sel.Name == "Device" {
						fn = "nvmlDevice" + sel.Sel.Name
					}
				}
			}
			if fn == "" {
				problems = append(problems, fmt.Sprintf("%s: a %s that is not nvml.Device.GetX needs .Named", fset.Position(call.Pos()), kind))
				return true
			}
			if kind == "Getter" {
				keys = append(keys, fn)
				return true
			}
			if len(call.Args) != 3 {
				problems = append(problems, fmt.Sprintf("%s: GetterOf with %d arguments", fset.Position(call.Pos()), len(call.Args)))
				return true
			}
			if s, ok := str(call.Args[2]); ok {
				keys = append(keys, fn+"("+s+")")
				return true
			}
			if id, ok := call.Args[2].(*ast.Ident); ok && fd != nil {
				if i, ok := params[id.Name]; ok {
					sels := callersArgs(fd.Name.Name, i)
					for _, s := range sels {
						keys = append(keys, fn+"("+s+")")
					}
					if len(sels) > 0 {
						return true
					}
				}
			}
			problems = append(problems, fmt.Sprintf("%s: GetterOf's selector name is not a string the file passes", fset.Position(call.Pos())))
			return true
		})
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("%s", strings.Join(problems, "; "))
	}
	sort.Strings(keys)
	return keys, nil
}

// TestPlainMetricsDeclaredOnce: every plain metric is named by hand only
// in metadata.yaml and the plainReadings file (the rest is generated),
// older metrics that docs, dashboards and rules read only in those among
// code files, and every plain getter's simulated value is written once.
func TestPlainMetricsDeclaredOnce(t *testing.T) {
	c, err := checkPlainMetrics(repoRoot, namedInDocs, allowed, perScenario)
	require.NoError(t, err)
	assert.Empty(t, c.problems, "\n%s", strings.Join(c.problems, "\n"))
	names := map[string]bool{}
	for _, m := range c.metrics {
		names[m.name] = true
	}
	for _, m := range issue35Metrics {
		assert.True(t, names[m], "%s is a plain metric", m)
		assert.NotContains(t, namedInDocs, m, "the metrics of issue 35 are checked in every file")
		for _, a := range allowed {
			if allowedBy([]allowance{a}, a.file, m) == 0 {
				assert.True(t, strings.HasPrefix(a.file, "tools/h200/") || a.file == "testdata/collector/h200-check.yaml",
					"%s: the metrics of issue 35 are named by hand only in the optional H200 check", a.file)
			}
		}
	}
	assert.Contains(t, c.getters, "nvmlDeviceGetMaxClockInfo(SM)")
	t.Logf("%s: %d plain metrics, %d getter keys: %v", c.plainFile, len(c.metrics), len(c.getters), c.getters)
}

// TestAddAMetricRecipe: the recipe of docs/design/architecture.md (between
// its add-a-metric markers) lists exactly the hand-edited places that
// TestPlainMetricsDeclaredOnce uses, and says how many: a fourth place
// must be written into both.
func TestAddAMetricRecipe(t *testing.T) {
	text := readFile(t, filepath.Join("docs", "design", "architecture.md"))
	start := strings.Index(text, "<!-- add-a-metric:start -->")
	end := strings.Index(text, "<!-- add-a-metric:end -->")
	require.True(t, start >= 0 && end > start, "architecture.md has the add-a-metric markers")
	recipe := text[start:end]
	var listed []string
	for _, m := range regexp.MustCompile("(?m)^\\d+\\. `([^`]+)`").FindAllStringSubmatch(recipe, -1) {
		listed = append(listed, m[1])
	}
	assert.Equal(t, handEdited, listed, "the recipe's hand-edited files")
	count := regexp.MustCompile(`\*\*(\d+) hand-edited files\*\*`).FindStringSubmatch(recipe)
	require.NotNil(t, count, "the recipe says **N hand-edited files**")
	assert.Equal(t, strconv.Itoa(len(handEdited)), count[1], "the recipe's count")
	for _, cmd := range []string{"make generate", "-update"} {
		assert.Contains(t, recipe, cmd, "the recipe's commands")
	}
	assert.FileExists(t, filepath.Join(repoRoot, metadataFile))
	assert.FileExists(t, filepath.Join(repoRoot, gettersFile))
	_, err := findPlainReadings(repoRoot)
	assert.NoError(t, err)
}

// fakeRepo writes a repository with one plain metric, a fixture, added
// the declared way: metadata.yaml, a plainReadings row, a getters.json
// value, and the generated files.
func fakeRepo(t *testing.T) string {
	root := t.TempDir()
	write := func(rel, text string) {
		p := filepath.Join(root, filepath.FromSlash(rel))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(text), 0o644))
	}
	write(metadataFile, `metrics:
  nvidia.gpu.fixture.level:
    enabled: true
    description: A fixture's level.
    stability: development
    unit: "{level}"
    gauge:
      value_type: int
`)
	write("receiver/nvmlreceiver/internal/readings/plain.go", `package readings

var plainReadings = []plainReading{
	device(i64((*builder).RecordNvidiaGpuFixtureLevelDataPoint), nvmlclient.Getter(nvml.Device.GetFixtureLevel).Costly()),
}
`)
	write("receiver/nvmlreceiver/internal/readings/plain_nocgo.go", "package readings\n\nvar plainReadings []plainReading\n")
	write(gettersFile, `{"nvmlDeviceGetFixtureLevel": 3}`)
	write("test/fakenvml/device.c", "nvmlReturn_t DECLDIR nvmlDeviceGetCount_v2(unsigned int *n)\n{\n\treturn NVML_SUCCESS;\n}\n")
	// Generated.
	write("receiver/nvmlreceiver/internal/metadata/generated_metrics.go",
		"// Code generated by mdatagen. DO NOT EDIT.\n\nfunc (mb *MetricsBuilder) RecordNvidiaGpuFixtureLevelDataPoint() {}\n")
	write("receiver/nvmlreceiver/internal/metadata/generated_config.go",
		"package metadata\n\ntype MetricsConfig struct {\n\tNvidiaGpuFixtureLevel MetricConfig `mapstructure:\"nvidia.gpu.fixture.level\"`\n}\n")
	write("receiver/nvmlreceiver/internal/metadata/testdata/config.yaml", "nvidia.gpu.fixture.level:\n  enabled: true\n")
	write("receiver/nvmlreceiver/documentation.md", "### nvidia.gpu.fixture.level\n")
	write("receiver/nvmlreceiver/testdata/scraper/h200_expected.yaml", "- name: nvidia.gpu.fixture.level\n")
	write("CHANGELOG.md", "- nvidia.gpu.fixture.level\n")
	write("docs/runs/h200-runs.md", "nvidia_gpu_fixture_level 3\n")
	write("docs/reference/metrics.md", "# Metrics\n\n"+table.StartMarker+"\n| `nvidia.gpu.fixture.level` | `nvidia_gpu_fixture_level` |\n"+table.EndMarker+"\n")
	// Names that are no metric's: a longer dotted name, a longer identifier.
	write("docs/other.md", "nvidia.gpu.fixture.level.max and nvidia_gpu_fixture_level_max and RecordNvidiaGpuFixtureLevelDataPointX\n")
	return root
}

// TestPlainMetricsCheckerCatches: on a fake repository, a fixture metric
// added the declared way passes; a hand-written file outside the declared
// places that names it (by each of its four names), prose around the
// generated table, and a getter without a simulated value are each
// reported.
func TestPlainMetricsCheckerCatches(t *testing.T) {
	root := fakeRepo(t)
	c, err := checkPlainMetrics(root, nil, nil, nil)
	require.NoError(t, err)
	assert.Empty(t, c.problems, "the fixture added the declared way")
	require.Len(t, c.metrics, 1)
	assert.Equal(t, plainMetric{name: "nvidia.gpu.fixture.level", record: "RecordNvidiaGpuFixtureLevelDataPoint",
		field: "NvidiaGpuFixtureLevel", prom: "nvidia_gpu_fixture_level"}, c.metrics[0])
	assert.Equal(t, []string{"nvmlDeviceGetFixtureLevel"}, c.getters)

	for rel, text := range map[string]string{
		"receiver/nvmlreceiver/extra.go":                  "func f(b *builder) { b.RecordNvidiaGpuFixtureLevelDataPoint() }\n",
		"receiver/nvmlreceiver/internal/readings/cfg.go":  "var on = cfg.Metrics.NvidiaGpuFixtureLevel.Enabled\n",
		"deploy/prometheus/rules.yaml":                    "expr: nvidia_gpu_fixture_level < 2\n",
		"test/e2e/fixture_test.go":                        "// checks nvidia.gpu.fixture.level.\n",
		"docs/reference/metrics.md":                       "nvidia.gpu.fixture.level, by hand\n" + table.StartMarker + "\n" + table.EndMarker + "\n",
		"receiver/nvmlreceiver/testdata/handwritten.yaml": "metrics: [nvidia.gpu.fixture.level]\n",
	} {
		t.Run(rel, func(t *testing.T) {
			root := fakeRepo(t)
			p := filepath.Join(root, filepath.FromSlash(rel))
			require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
			require.NoError(t, os.WriteFile(p, []byte(text), 0o644))
			c, err := checkPlainMetrics(root, nil, nil, nil)
			require.NoError(t, err)
			require.Len(t, c.problems, 1, "%v", c.problems)
			assert.Contains(t, c.problems[0], rel+" names the plain metric nvidia.gpu.fixture.level")

			// An allowance with its reason lets it, and is reported once stale.
			allow := []allowance{{rel, []string{"nvidia.gpu.fixture.level"}, "a test of the fixture"}}
			c, err = checkPlainMetrics(root, nil, allow, nil)
			require.NoError(t, err)
			assert.Empty(t, c.problems)
			require.NoError(t, os.Remove(p))
			c, err = checkPlainMetrics(root, nil, allow, nil)
			require.NoError(t, err)
			assert.Equal(t, []string{"allowed " + rel + ": no such file names nvidia.gpu.fixture.level any more; drop it"}, c.problems)
		})
	}

	t.Run("a metric of docs is checked in code only", func(t *testing.T) {
		root := fakeRepo(t)
		docs := map[string]string{"nvidia.gpu.fixture.level": "a dashboard reads it"}
		require.NoError(t, os.MkdirAll(filepath.Join(root, "deploy"), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(root, "deploy", "rules.yaml"), []byte("expr: nvidia_gpu_fixture_level\n"), 0o644))
		c, err := checkPlainMetrics(root, docs, nil, nil)
		require.NoError(t, err)
		assert.Empty(t, c.problems)
		require.NoError(t, os.WriteFile(filepath.Join(root, "receiver", "nvmlreceiver", "x.go"), []byte("// nvidia.gpu.fixture.level\n"), 0o644))
		c, err = checkPlainMetrics(root, docs, nil, nil)
		require.NoError(t, err)
		require.Len(t, c.problems, 1)
		assert.Contains(t, c.problems[0], "receiver/nvmlreceiver/x.go names the plain metric")
	})

	t.Run("a new getter without a simulated value", func(t *testing.T) {
		root := fakeRepo(t)
		require.NoError(t, os.WriteFile(filepath.Join(root, filepath.FromSlash(gettersFile)), []byte("{}"), 0o644))
		c, err := checkPlainMetrics(root, nil, nil, nil)
		require.NoError(t, err)
		assert.Equal(t, []string{"receiver/nvmlreceiver/internal/readings/plain.go: getter nvmlDeviceGetFixtureLevel has no simulated value: add it to test/nvmltest/getters.json"}, c.problems)
		// A hand-written simulator function is the other place.
		require.NoError(t, os.WriteFile(filepath.Join(root, "test", "fakenvml", "fixture.c"),
			[]byte("nvmlReturn_t DECLDIR nvmlDeviceGetFixtureLevel(nvmlDevice_t d, unsigned int *v)\n{\n\treturn NVML_SUCCESS;\n}\n"), 0o644))
		c, err = checkPlainMetrics(root, nil, nil, nil)
		require.NoError(t, err)
		assert.Empty(t, c.problems)
	})
}
