package deploy

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

// helmResult runs helm and returns its combined output and whether it
// succeeded.
func helmResult(t *testing.T, args ...string) (string, bool) {
	t.Helper()
	var out bytes.Buffer
	cmd := exec.Command(binFlag(t, "helm", *helmPath), args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if err != nil {
		if _, ok := err.(*exec.ExitError); !ok {
			t.Fatalf("helm %s: %v", strings.Join(args, " "), err)
		}
	}
	return out.String(), err == nil
}

// schemaCase is a set of values and, for a refusal, what helm's message
// must say: the key's JSON pointer and the reason.
type schemaCase struct {
	name string
	args []string
	// want: substrings of helm's message; empty: the values are accepted.
	want []string
}

var schemaRefusals = []schemaCase{
	{"unknown key (a typo)", []string{"--set", "prometheus.enable=true"},
		[]string{"at '/prometheus'", "additional properties 'enable' not allowed"}},
	{"unknown top-level key", []string{"--set", "colectionInterval=10s"},
		[]string{"additional properties 'colectionInterval' not allowed"}},
	{"unknown key under otlp.tls", []string{"--set", "otlp.tls.ca_file=ca.crt"},
		[]string{"at '/otlp/tls'", "additional properties 'ca_file' not allowed"}},
	{"unknown key three levels down", []string{"--set", "prometheusRule.waste.alerts.idle.threshold=0.5"},
		[]string{"at '/prometheusRule/waste/alerts/idle'", "'threshold' not allowed"}},
	{"unknown probe field (the chart sets httpGet)", []string{"--set", "livenessProbe.httpGet.port=1"},
		[]string{"at '/livenessProbe'", "'httpGet' not allowed"}},
	{"duration without a unit", []string{"--set", "collectionInterval=10"},
		[]string{"at '/collectionInterval'", "got number, want string"}},
	{"duration without a unit, as a string", []string{"--set-string", "collectionInterval=10"},
		[]string{"at '/collectionInterval'", "'10' does not match pattern '^([0-9]+([.][0-9]+)?(ms|s|m|h))+$'"}},
	{"duration in nanoseconds", []string{"--set", "collectionInterval=10ns"},
		[]string{"at '/collectionInterval'", "does not match pattern"}},
	{"duration below the receiver's 100ms", []string{"--set", "collectionInterval=50ms"},
		[]string{"at '/collectionInterval'", "does not match pattern"}},
	{"duration below the receiver's 100ms, in seconds", []string{"--set", "collectionInterval=0.05s"},
		[]string{"at '/collectionInterval'", "does not match pattern"}},
	{"zero duration", []string{"--set", "collectionInterval=0s"},
		[]string{"at '/collectionInterval'", "does not match pattern"}},
	{"recovery duration without a unit", []string{"--set-string", "healthCheck.recoveryDuration=300"},
		[]string{"at '/healthCheck/recoveryDuration'", "does not match pattern"}},
	{"metric expiration without a unit", []string{"--set-string", "prometheus.metricExpiration=30"},
		[]string{"at '/prometheus/metricExpiration'"}},
	{"Prometheus duration with a fraction", []string{"--set", "prometheus.serviceMonitor.interval=1.5m"},
		[]string{"at '/prometheus/serviceMonitor/interval'", "does not match pattern"}},
	{"Prometheus rule for: without a unit", []string{"--set-string", "prometheusRule.idle.for=300"},
		[]string{"at '/prometheusRule/idle/for'", "'300' does not match pattern '^([0-9]+(ms|s|m|h|d|w|y))+$'"}},
	{"otlp.protocol not in the enum", []string{"--set", "otlp.protocol=grpcs"},
		[]string{"at '/otlp/protocol'", "value must be one of 'grpc', 'http'"}},
	{"image.pullPolicy not in the enum", []string{"--set", "image.pullPolicy=Sometimes"},
		[]string{"at '/image/pullPolicy'", "value must be one of"}},
	{"toleration effect not in the enum", []string{"--set", "tolerations[0].key=a,tolerations[0].effect=NoSchedul"},
		[]string{"at '/tolerations/0/effect'", "value must be one of"}},
	{"insecure with a CA file", []string{"--set", "otlp.tls.insecure=true,otlp.tls.secretName=s,otlp.tls.caFile=ca.crt"},
		[]string{"at '/otlp/tls/caFile'", "value must be ''"}},
	{"insecure with a client certificate", []string{"--set", "otlp.tls.insecure=true,otlp.tls.secretName=s,otlp.tls.certFile=tls.crt,otlp.tls.keyFile=tls.key"},
		[]string{"at '/otlp/tls/certFile'", "at '/otlp/tls/keyFile'", "value must be ''"}},
	{"insecure with a server name override", []string{"--set", "otlp.tls.insecure=true,otlp.tls.serverNameOverride=gw"},
		[]string{"at '/otlp/tls/serverNameOverride'", "value must be ''"}},
	{"insecure with a TLS Secret", []string{"--set", "otlp.tls.insecure=true,otlp.tls.secretName=s"},
		[]string{"at '/otlp/tls/secretName'", "value must be ''"}},
	{"client certificate without its key", []string{"--set", "otlp.tls.secretName=s,otlp.tls.certFile=tls.crt"},
		[]string{"at '/otlp/tls/keyFile'", "minLength"}},
	{"client key without its certificate", []string{"--set", "otlp.tls.secretName=s,otlp.tls.keyFile=tls.key"},
		[]string{"at '/otlp/tls/certFile'", "minLength"}},
	{"CA file without the Secret that holds it", []string{"--set", "otlp.tls.caFile=ca.crt"},
		[]string{"at '/otlp/tls/secretName'", "minLength"}},
	{"OTLP/HTTP with a host:port", []string{"--set", "otlp.protocol=http,otlp.endpoint=gw:4318"},
		[]string{"at '/otlp/endpoint'", "does not match pattern '^https?://'"}},
	{"OTLP on without an endpoint", []string{"--set", "otlp.endpoint="},
		[]string{"at '/otlp/endpoint'", "minLength"}},
	{"ServiceMonitor without the Prometheus endpoint", []string{"--set", "prometheus.serviceMonitor.enabled=true"},
		[]string{"at '/prometheus/enabled'", "value must be true"}},
	{"port out of range", []string{"--set", "prometheus.port=70000"},
		[]string{"at '/prometheus/port'", "maximum"}},
	{"process cap above the client's listing limit", []string{"--set", "attribution.maxProcessesPerGPU=5000"},
		[]string{"at '/attribution/maxProcessesPerGPU'", "maximum"}},
	{"idle activity out of (0, 1)", []string{"--set", "prometheusRule.waste.idleActivity=1"},
		[]string{"at '/prometheusRule/waste/idleActivity'", "exclusiveMaximum"}},
	{"negative price", []string{"--set", "prometheusRule.waste.pricePerHour.NVIDIA\\ H200=-1"},
		[]string{"at '/prometheusRule/waste/pricePerHour/NVIDIA H200'", "minimum"}},
	{"extra component with a bad id", []string{"--set", "extraExporters.Debug\\ X.verbosity=basic"},
		[]string{"at '/extraExporters'", "additional properties 'Debug X' not allowed"}},
}

var schemaAccepted = []schemaCase{
	{"the receiver's minimum interval", []string{"--set", "collectionInterval=100ms"}, nil},
	{"a fractional interval", []string{"--set", "collectionInterval=0.5s"}, nil},
	{"a compound interval", []string{"--set", "collectionInterval=1m30s"}, nil},
	{"a fraction of a minute", []string{"--set", "collectionInterval=0.25m"}, nil},
	{"plain text alone", []string{"--set", "otlp.tls.insecure=true"}, nil},
	{"TLS with a CA only", []string{"--set", "otlp.tls.secretName=s,otlp.tls.caFile=ca.crt"}, nil},
	{"OTLP/HTTP with a URL", []string{"--set", "otlp.protocol=http,otlp.endpoint=http://gw:4318"}, nil},
	{"OTLP off without an endpoint", []string{"--set", "otlp.enabled=false,otlp.endpoint=,prometheus.enabled=true"}, nil},
	{"metric expiration in Go units", []string{"--set", "prometheus.enabled=true,prometheus.metricExpiration=1m30s"}, nil},
	{"a dropped price (null)", []string{"--set", "prometheusRule.enabled=true,prometheusRule.waste.pricePerHour.NVIDIA\\ H200=null"}, nil},
	{"an integer image tag", []string{"--set", "image.tag=7"}, nil},
	{"global values (this chart as a subchart)", []string{"--set", "global.imageRegistry=r"}, nil},
	{"affinity", []string{"--set", "affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].key=a,affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].operator=Exists"}, nil},
}

// TestSchemaRefusals: every refusal of values.schema.json fails both helm
// lint and helm template, with a message that names the key. Without the
// schema these values render (the chart checks none of them but
// otlp.endpoint and the ServiceMonitor's dependency).
func TestSchemaRefusals(t *testing.T) {
	for _, c := range schemaRefusals {
		t.Run(c.name, func(t *testing.T) {
			for _, cmd := range [][]string{
				{"template", "otelcol-nvml", chartDir, "--namespace", "monitoring"},
				{"lint", "--strict", chartDir},
			} {
				out, ok := helmResult(t, append(cmd, c.args...)...)
				require.False(t, ok, "helm %s %v accepted the values:\n%.500s", cmd[0], c.args, out)
				assert.Contains(t, out, "values don't meet the specifications of the schema", "helm %s: not the schema's refusal", cmd[0])
				for _, w := range c.want {
					assert.Contains(t, out, w, "helm %s %v", cmd[0], c.args)
				}
			}
		})
	}
}

// TestSchemaAccepts: the schema is no stricter than the chart and the
// receiver (values at the bounds, and the forms the README shows).
func TestSchemaAccepts(t *testing.T) {
	for _, c := range schemaAccepted {
		t.Run(c.name, func(t *testing.T) {
			out, ok := helmResult(t, append([]string{"template", "otelcol-nvml", chartDir, "--namespace", "monitoring"}, c.args...)...)
			require.True(t, ok, "helm template %v refused:\n%s", c.args, out)
		})
	}
}

// TestTemplateWithoutKubeVersion: the Makefile's helm has a default
// Kubernetes version linked in that meets the chart's kubeVersion, so a
// plain `helm template` / `helm lint` works (a go-installed helm assumes
// v1.20 and refuses the chart).
func TestTemplateWithoutKubeVersion(t *testing.T) {
	out, ok := helmResult(t, "template", "otelcol-nvml", chartDir)
	require.True(t, ok, "helm template without --kube-version:\n%s", out)
	out, ok = helmResult(t, "lint", "--strict", chartDir)
	require.True(t, ok, "helm lint without --kube-version:\n%s", out)
}

// schemaNode is a JSON Schema object, as far as the lookups below read it.
type schemaNode map[string]any

func loadSchema(t *testing.T) schemaNode {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(chartDir, "values.schema.json"))
	require.NoError(t, err)
	var s schemaNode
	require.NoError(t, json.Unmarshal(data, &s))
	assert.Equal(t, "http://json-schema.org/draft-07/schema#", s["$schema"], "draft 7, as Helm reads it")
	return s
}

// child returns the schema of key under node: a declared property, else an
// additionalProperties schema; nil where the key is not allowed.
func (root schemaNode) child(node schemaNode, key string) schemaNode {
	node = root.deref(node)
	if props, ok := node["properties"].(map[string]any); ok {
		if p, ok := props[key].(map[string]any); ok {
			return root.deref(p)
		}
	}
	if pp, ok := node["patternProperties"].(map[string]any); ok {
		for re, p := range pp {
			if regexp.MustCompile(re).MatchString(key) {
				return root.deref(p.(map[string]any))
			}
		}
	}
	if ap, ok := node["additionalProperties"].(map[string]any); ok {
		return root.deref(ap)
	}
	return nil
}

func (root schemaNode) deref(n schemaNode) schemaNode {
	if r, ok := n["$ref"].(string); ok {
		name := strings.TrimPrefix(r, "#/definitions/")
		return root["definitions"].(map[string]any)[name].(map[string]any)
	}
	return n
}

// strict: every object the schema declares properties for refuses others.
func checkStrict(t *testing.T, root, node schemaNode, path string) {
	node = root.deref(node)
	_, pp := node["patternProperties"]
	if props, ok := node["properties"].(map[string]any); ok || pp {
		_, apSchema := node["additionalProperties"].(map[string]any)
		assert.True(t, node["additionalProperties"] == false || apSchema, "%s: additionalProperties must be false", path)
		for k, p := range props {
			checkStrict(t, root, p.(map[string]any), path+"/"+k)
		}
	}
	if items, ok := node["items"].(map[string]any); ok {
		checkStrict(t, root, items, path+"/items")
	}
	if ap, ok := node["additionalProperties"].(map[string]any); ok {
		checkStrict(t, root, ap, path+"/*")
	}
}

// checkValues: every key of values.yaml, at every level, has a schema.
func checkValues(t *testing.T, root, node schemaNode, path string, v any) {
	m, ok := v.(map[string]any)
	if !ok {
		return
	}
	for k, c := range m {
		p := strings.TrimPrefix(path+"."+k, ".")
		child := root.child(node, k)
		if !assert.NotNil(t, child, "%s (in values.yaml) is not in values.schema.json", p) {
			continue
		}
		checkValues(t, root, child, p, c)
	}
}

// readmeValues reads the value names of the chart README's Values table:
// "`a.b`, `.c`" names a.b and a.c.
func readmeValues(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(chartDir, "README.md"))
	require.NoError(t, err)
	_, table, ok := strings.Cut(string(data), "## Values\n")
	require.True(t, ok, "the chart README has a Values section")
	table, _, _ = strings.Cut(table, "\n## ")
	name := regexp.MustCompile("`([^`]+)`")
	var names []string
	for _, line := range strings.Split(table, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 3 || strings.HasPrefix(strings.TrimSpace(cells[1]), "---") || strings.TrimSpace(cells[1]) == "value" {
			continue
		}
		first := ""
		for _, m := range name.FindAllStringSubmatch(cells[1], -1) {
			n := m[1]
			if strings.HasPrefix(n, ".") {
				require.NotEmpty(t, first, "README row %q: %s follows no full name", line, n)
				n = first[:strings.LastIndex(first, ".")] + n
			} else if first == "" {
				first = n
			}
			names = append(names, n)
		}
	}
	require.NotEmpty(t, names)
	return names
}

// TestSchemaCoversValues: every value of values.yaml and of the chart
// README's table is declared in the schema (so a documented value is never
// refused as unknown), and every object of the schema is strict.
func TestSchemaCoversValues(t *testing.T) {
	root := loadSchema(t)
	checkStrict(t, root, root, "")

	data, err := os.ReadFile(filepath.Join(chartDir, "values.yaml"))
	require.NoError(t, err)
	var values map[string]any
	require.NoError(t, yaml.Unmarshal(data, &values))
	checkValues(t, root, root, "", values)
	readme := readmeValues(t)
	for _, p := range readme {
		node := root
		for _, k := range strings.Split(p, ".") {
			if node = root.child(node, k); node == nil {
				break
			}
		}
		assert.NotNil(t, node, "%s (in README.md) is not in values.schema.json", p)
	}
	// The README documents the values.yaml top-level keys, and names only
	// values that values.yaml has (or their Kubernetes parents).
	for _, p := range readme {
		top, _, _ := strings.Cut(p, ".")
		assert.Contains(t, values, top, "the README names %s, which values.yaml lacks", p)
	}
}

// durationMatcher reads a duration definition of the schema: its short
// pattern (the shape, what helm prints for a value without a unit) and,
// for values of that shape (if), the bound's patterns (then, one or allOf).
func durationMatcher(t *testing.T, def map[string]any) func(string) bool {
	t.Helper()
	shape := regexp.MustCompile(def["pattern"].(string))
	ifPattern := def["if"].(map[string]any)["pattern"].(string)
	require.Equal(t, shape.String(), ifPattern, "if checks the shape that pattern states")
	then := def["then"].(map[string]any)
	var bounds []*regexp.Regexp
	if p, ok := then["pattern"].(string); ok {
		bounds = append(bounds, regexp.MustCompile(p))
	}
	if all, ok := then["allOf"].([]any); ok {
		for _, sub := range all {
			bounds = append(bounds, regexp.MustCompile(sub.(map[string]any)["pattern"].(string)))
		}
	}
	require.NotEmpty(t, bounds, "then holds the bound")
	return func(d string) bool {
		if !shape.MatchString(d) {
			return false
		}
		for _, b := range bounds {
			if !b.MatchString(d) {
				return false
			}
		}
		return true
	}
}

// TestSchemaDurationBounds: the schema's duration patterns say what the
// receiver and the collector accept. collectionInterval's minimum is read
// from the receiver's source (minCollectionInterval in
// receiver/nvmlreceiver/config.go), and each pattern is checked against
// time.ParseDuration on values around the bounds. The short pattern that
// helm prints for a value without a unit stays short.
func TestSchemaDurationBounds(t *testing.T) {
	root := loadSchema(t)
	defs := root["definitions"].(map[string]any)
	for _, name := range []string{"collectionInterval", "goDuration", "promDuration"} {
		def := defs[name].(map[string]any)
		assert.LessOrEqual(t, len(def["pattern"].(string)), 50, "%s: the pattern helm prints for a value without a unit", name)
		assert.Contains(t, def["description"], "a ", "%s says what a duration needs", name)
	}
	type matcher interface{ MatchString(string) bool }
	pattern := func(name string) matcher {
		return matchFunc(durationMatcher(t, defs[name].(map[string]any)))
	}

	src, err := os.ReadFile(filepath.Join(repoRoot, "receiver", "nvmlreceiver", "config.go"))
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^const minCollectionInterval = (\d+) \* time\.(Millisecond|Second)$`).FindSubmatch(src)
	require.NotNil(t, m, "minCollectionInterval in receiver/nvmlreceiver/config.go")
	min, err := time.ParseDuration(string(m[1]) + map[string]string{"Millisecond": "ms", "Second": "s"}[string(m[2])])
	require.NoError(t, err)
	require.Equal(t, 100*time.Millisecond, min, "the receiver's minimum changed: change the collectionInterval pattern with it")

	coll := pattern("collectionInterval")
	for _, d := range []string{"1ns", "99ms", "100ms", "100.5ms", "250ms", "0.09s", "0.1s", "0.5s", "1s", "10s", "90s",
		"0.01m", "0.25m", "1m", "1m30s", "1h", "2h45m", "0099ms", "0100ms", "1000ms", "0.10s"} {
		v, err := time.ParseDuration(d)
		require.NoError(t, err, d)
		assert.Equal(t, v >= min, coll.MatchString(d), "collectionInterval %q (%v) against the receiver's minimum %v", d, v, min)
	}
	// A unit the chart's durationMs cannot read, or none, is refused.
	for _, d := range []string{"10", "", "1us", "500000us", "1.5", "s", "1 s", "1d", "-1s"} {
		assert.False(t, coll.MatchString(d), "collectionInterval %q", d)
	}

	goDur := pattern("goDuration")
	for _, d := range []string{"1ns", "1us", "1µs", "0.5s", "5m", "1h30m", "0s1ms", ".5s"} {
		v, err := time.ParseDuration(d)
		require.NoError(t, err, d)
		assert.Equal(t, v > 0, goDur.MatchString(d), "Go duration %q (%v)", d, v)
	}
	for _, d := range []string{"0s", "0", "0ms0s", "300", "", "5 m", "1d"} {
		assert.False(t, goDur.MatchString(d), "Go duration %q", d)
	}

	// Prometheus durations: integers and its units (model.ParseDuration).
	match := durationMatcher(t, defs["promDuration"].(map[string]any))
	for _, d := range []string{"30s", "5m", "1h30m", "1d", "2w", "1y", "500ms", "1h0m"} {
		assert.True(t, match(d), "Prometheus duration %q", d)
	}
	for _, d := range []string{"1.5m", "0s", "0", "", "30", "1m1h", "5 m", "1us"} {
		assert.False(t, match(d), "Prometheus duration %q", d)
	}
}

// matchFunc is a func(string) bool with regexp's MatchString.
type matchFunc func(string) bool

func (f matchFunc) MatchString(s string) bool { return f(s) }
