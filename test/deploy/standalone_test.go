package deploy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

// One GPU server without Kubernetes (deploy/standalone,
// docs/operations/single-server.md): the rules rendered with your values by
// `make rules-render`, and the README's commands, run as written.

var standaloneDir = filepath.Join(repoRoot, "deploy", "standalone")

// tool returns the path of a command this test runs, failing when it is
// missing (CI installs them: .ci/run).
func tool(t *testing.T, name, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s not found: apt-get install %s", name, pkg)
	}
	return p
}

// makeIn runs make in the repository's root with the pinned helm, outside
// the make that runs this test (its flags and job server).
func makeIn(t *testing.T, args ...string) ([]byte, error) {
	t.Helper()
	args = append([]string{"--no-print-directory"}, args...)
	args = append(args, "HELM="+binFlag(t, "helm", *helmPath), "PROMTOOL="+tool(t, "promtool", "prometheus"))
	cmd := exec.Command("make", args...)
	cmd.Dir = repoRoot
	cmd.Env = append(os.Environ(), "MAKEFLAGS=", "MFLAGS=", "MAKELEVEL=")
	return cmd.CombinedOutput()
}

// ruleFile is a plain Prometheus rules file.
type ruleFile struct {
	Groups []monitoringv1.RuleGroup `json:"groups"`
}

func readRuleFile(t *testing.T, path string) ruleFile {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	var f ruleFile
	require.NoError(t, yaml.UnmarshalStrict(data, &f), "%s is not a plain rules file", path)
	require.NotEmpty(t, f.Groups, path)
	return f
}

func findRule(f ruleFile, name string) []monitoringv1.Rule {
	var out []monitoringv1.Rule
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			if r.Alert == name || r.Record == name {
				out = append(out, r)
			}
		}
	}
	return out
}

// TestRulesRender: `make rules-render` with no values writes the shipped
// deploy/prometheus/rules.yaml, rule for rule; with a changed bound and
// prices, the bound moves in the diagnosis' expression and in the alert's
// summary together, the alert's `for` and the price records follow, and
// promtool accepts the file.
func TestRulesRender(t *testing.T) {
	dir := t.TempDir()
	defaults := filepath.Join(dir, "defaults.yaml")
	out, err := makeIn(t, "rules-render", "VALUES=", "OUT="+defaults)
	require.NoError(t, err, "%s", out)
	var shipped monitoringv1.PrometheusRuleSpec
	data, err := os.ReadFile(filepath.Join(repoRoot, "deploy", "prometheus", "rules.yaml"))
	require.NoError(t, err)
	require.NoError(t, yaml.UnmarshalStrict(data, &shipped))
	assert.Equal(t, shipped.Groups, readRuleFile(t, defaults).Groups, "make rules-render without values and deploy/prometheus/rules.yaml differ")

	values := filepath.Join(dir, "my-values.yaml")
	require.NoError(t, os.WriteFile(values, []byte(`prometheusRule:
  waste:
    gpuBound:
      activity: 0.35
    alerts:
      underused:
        enabled: true
        for: 7m
    pricePerHour:
      NVIDIA H200: 7.25
    defaultPricePerHour: 2.5
`), 0o600))
	mine := filepath.Join(dir, "rules.yaml")
	out, err = makeIn(t, "rules-render", "VALUES="+values, "OUT="+mine)
	require.NoError(t, err, "%s", out)
	text, err := os.ReadFile(mine)
	require.NoError(t, err)
	assert.True(t, bytes.HasPrefix(text, []byte("# ")), "the file says where it comes from")
	assert.Contains(t, string(text), values)
	f := readRuleFile(t, mine)
	base := readRuleFile(t, defaults)

	// The bound: in the diagnosis' expression ...
	cand := findRule(f, "gpu_holder:nvidia_gpu_diagnosis_candidate:5m")
	require.Len(t, cand, 1)
	assert.Contains(t, cand[0].Expr.String(), ">= 0.35", "the diagnosis reads the bound")
	assert.NotContains(t, findRule(base, "gpu_holder:nvidia_gpu_diagnosis_candidate:5m")[0].Expr.String(), ">= 0.35")
	// ... and in the alert's text, from the same value.
	under := findRule(f, "GPUHolderUnderused")
	require.Len(t, under, 1)
	assert.Contains(t, under[0].Annotations["summary"], "under 35%", "the summary says the bound")
	assert.NotContains(t, under[0].Annotations["summary"], "under 70%")
	assert.Empty(t, findRule(base, "GPUHolderUnderused"), "off by default")
	underused := findRule(readRuleFile(t, filepath.Join(repoRoot, "deploy", "prometheus", "underused-rules.yaml")), "GPUHolderUnderused")
	require.Len(t, underused, 1)
	assert.Contains(t, underused[0].Annotations["summary"], "under 70%")
	require.NotNil(t, under[0].For)
	assert.Equal(t, monitoringv1.Duration("7m"), *under[0].For)

	// The prices.
	prices := map[string]string{}
	for _, r := range findRule(f, "nvidia_gpu_price_per_hour") {
		prices[r.Labels["hw_model"]] = strings.TrimSpace(r.Expr.String())
	}
	assert.Equal(t, "vector(7.25)", prices["NVIDIA H200"])
	assert.True(t, strings.HasPrefix(prices[""], "2.5 *"), "the default price: %q", prices[""])

	check := exec.Command(tool(t, "promtool", "prometheus"), "check", "rules", mine)
	if out, err := check.CombinedOutput(); err != nil {
		t.Errorf("promtool check rules: %v\n%s", err, out)
	}
}

// TestRulesRenderRefusesBadValues: a values file the chart's schema
// refuses fails the target, and leaves no rules file.
func TestRulesRenderRefusesBadValues(t *testing.T) {
	dir := t.TempDir()
	values := filepath.Join(dir, "bad.yaml")
	require.NoError(t, os.WriteFile(values, []byte("prometheusRule:\n  waste:\n    gpuBound:\n      activity: lots\n"), 0o600))
	out, err := makeIn(t, "rules-render", "VALUES="+values, "OUT="+filepath.Join(dir, "rules.yaml"))
	require.Error(t, err, "%s", out)
	assert.NoFileExists(t, filepath.Join(dir, "rules.yaml"))
}

// readmeCommand is one command of the README's single-server section.
type readmeCommand struct {
	line string
	env  []string
	args []string
}

var envAssign = regexp.MustCompile(`^[A-Z_]+=`)

// readmeCommands returns the commands of the ```sh blocks between the
// single-server markers of README.md: a line's comment and trailing & off,
// "a && b" as two commands, leading VAR=value as the environment.
func readmeCommands(t *testing.T) []readmeCommand {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	require.NoError(t, err)
	text := string(data)
	start := strings.Index(text, "<!-- single-server:start -->")
	end := strings.Index(text, "<!-- single-server:end -->")
	require.True(t, start >= 0 && end > start, "README.md has the single-server markers")
	var out []readmeCommand
	inBlock := false
	for _, line := range strings.Split(text[start:end], "\n") {
		switch {
		case strings.HasPrefix(line, "```sh"):
			inBlock = true
			continue
		case strings.HasPrefix(line, "```"):
			inBlock = false
			continue
		case !inBlock:
			continue
		}
		if i := strings.Index(line, " #"); i >= 0 {
			line = line[:i]
		}
		line = strings.TrimSuffix(strings.TrimSpace(line), "&")
		for _, part := range strings.Split(line, "&&") {
			c := readmeCommand{line: strings.TrimSpace(part)}
			for _, f := range strings.Fields(part) {
				if len(c.args) == 0 && envAssign.MatchString(f) {
					c.env = append(c.env, f)
					continue
				}
				c.args = append(c.args, f)
			}
			if len(c.args) > 0 {
				out = append(out, c)
			}
		}
	}
	require.NotEmpty(t, out, "README.md's single-server section has no commands")
	return out
}

// flagValue returns --name=value of args.
func flagValue(args []string, name string) string {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v
		}
	}
	return ""
}

// makeVar returns NAME=value of a make command line.
func makeVar(args []string, name string) string {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v
		}
	}
	return ""
}

// loopback fails unless addr (host:port or a URL) is on 127.0.0.1.
func loopback(t *testing.T, what, addr string) string {
	t.Helper()
	if u, err := url.Parse(addr); err == nil && u.Host != "" {
		addr = u.Host
	}
	host, _, err := net.SplitHostPort(addr)
	require.NoError(t, err, "%s: %q", what, addr)
	assert.Equal(t, "127.0.0.1", host, "%s listens on loopback only", what)
	return addr
}

// TestREADMESingleServer runs the README's single-server commands as
// written: the rendering, promtool's and amtool's checks and the report's
// build; the long-running ones (the collector, Prometheus, Alertmanager,
// the report) get their configs validated and their flags parsed, and
// every address they name must meet: Prometheus scrapes the collector's
// endpoint, sends to the Alertmanager's and loads the rendered rules; the
// report and amtool ask those two. A command it does not know fails it.
func TestREADMESingleServer(t *testing.T) {
	cmds := readmeCommands(t)
	promtool := tool(t, "promtool", "prometheus")
	amtool := tool(t, "amtool", "prometheus-alertmanager")
	abs := func(p string) string { return filepath.Join(repoRoot, p) }
	run := func(c readmeCommand, bin string, args ...string) string {
		cmd := exec.Command(bin, args...)
		cmd.Dir = repoRoot
		cmd.Env = append(os.Environ(), c.env...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("README: %s: %v\n%s", c.line, err, out)
		}
		return string(out)
	}

	var (
		rulesOut, promChecked, amChecked, collectorConfig string
		promConfig, promListen, amConfig, amListen        string
		amtoolURL                                         string
		reportArgs                                        []string
		seen                                              = map[string]bool{}
	)
	for _, c := range cmds {
		kind := c.args[0]
		if kind == "make" && len(c.args) > 1 {
			kind += " " + c.args[1]
		}
		seen[kind] = true
		switch kind {
		case "make rules-render":
			out, err := makeIn(t, c.args[1:]...)
			require.NoError(t, err, "README: %s\n%s", c.line, out)
			rulesOut = makeVar(c.args, "OUT")
			if rulesOut == "" {
				rulesOut = "deploy/standalone/rules.yaml"
			}
			readRuleFile(t, abs(rulesOut))
		case "promtool":
			require.Equal(t, []string{"check", "config"}, c.args[1:3], c.line)
			promChecked = c.args[3]
			out := run(c, promtool, c.args[1:]...)
			assert.Contains(t, out, "1 rule files found", "README: %s: Prometheus loads the rendered rules", c.line)
		case "amtool":
			switch c.args[1] {
			case "check-config":
				amChecked = c.args[2]
				run(c, amtool, c.args[1:]...)
			case "alert":
				amtoolURL = flagValue(c.args, "alertmanager.url")
			default:
				t.Errorf("README: %s: an amtool command this test does not check", c.line)
			}
		case "make run":
			collectorConfig = makeVar(c.args, "CONFIG")
			require.NotEmpty(t, collectorConfig, c.line)
			data, err := os.ReadFile(abs(collectorConfig))
			require.NoError(t, err)
			validateConfigEnv(t, "README: "+c.line, string(data), c.env)
			assert.Contains(t, c.env, "HOST_NAME=$(hostname)", "the alerts name the host")
		case "prometheus", "prometheus-alertmanager":
			run(c, tool(t, kind, kind), append(c.args[1:], "--help")...) // the flags parse
			listen := loopback(t, c.line, flagValue(c.args, "web.listen-address"))
			if kind == "prometheus" {
				promConfig, promListen = flagValue(c.args, "config.file"), listen
			} else {
				amConfig, amListen = flagValue(c.args, "config.file"), listen
				assert.Contains(t, c.args, "--cluster.listen-address=", "one Alertmanager: no cluster listener (its default is every address)")
			}
		case "make report":
			out, err := makeIn(t, "report")
			require.NoError(t, err, "README: %s\n%s", c.line, out)
		case "_build/otelcol-nvml-report":
			reportArgs = c.args
		default:
			t.Errorf("README: %s: a command this test does not check; add it here", c.line)
		}
	}
	for _, k := range []string{"make rules-render", "promtool", "amtool", "make run", "prometheus", "prometheus-alertmanager", "make report", "_build/otelcol-nvml-report"} {
		assert.True(t, seen[k], "the README's single-server section runs no %s", k)
	}
	require.False(t, t.Failed())

	// Every file named is the one checked.
	assert.Equal(t, promChecked, promConfig, "Prometheus runs the config promtool checked")
	assert.Equal(t, amChecked, amConfig, "Alertmanager runs the config amtool checked")
	assert.Equal(t, "http://"+amListen, amtoolURL, "amtool asks the README's Alertmanager")

	// Prometheus' config: the collector's endpoint, the Alertmanager's, the rendered rules.
	var prom struct {
		RuleFiles []string `json:"rule_files"`
		Alerting  struct {
			Alertmanagers []struct {
				StaticConfigs []struct {
					Targets []string `json:"targets"`
				} `json:"static_configs"`
			} `json:"alertmanagers"`
		} `json:"alerting"`
		ScrapeConfigs []struct {
			JobName       string `json:"job_name"`
			StaticConfigs []struct {
				Targets []string `json:"targets"`
			} `json:"static_configs"`
		} `json:"scrape_configs"`
	}
	data, err := os.ReadFile(abs(promConfig))
	require.NoError(t, err)
	require.NoError(t, yaml.Unmarshal(data, &prom))
	require.Len(t, prom.RuleFiles, 1)
	assert.Equal(t, filepath.Clean(rulesOut), filepath.Join(filepath.Dir(promConfig), prom.RuleFiles[0]), "Prometheus loads what make rules-render wrote")
	require.Len(t, prom.Alerting.Alertmanagers, 1)
	assert.Equal(t, []string{amListen}, prom.Alerting.Alertmanagers[0].StaticConfigs[0].Targets, "Prometheus sends to the README's Alertmanager")
	var col struct {
		Exporters struct {
			Prometheus struct {
				Endpoint string `json:"endpoint"`
			} `json:"prometheus"`
		} `json:"exporters"`
	}
	data, err = os.ReadFile(abs(collectorConfig))
	require.NoError(t, err)
	require.NoError(t, yaml.Unmarshal(data, &col))
	collector := loopback(t, "the collector's prometheus exporter", col.Exporters.Prometheus.Endpoint)
	require.Len(t, prom.ScrapeConfigs, 1)
	assert.Equal(t, []string{collector}, prom.ScrapeConfigs[0].StaticConfigs[0].Targets, "Prometheus scrapes the README's collector")

	// The report: its flags parse, it asks the README's Prometheus by default,
	// and without a Prometheus it says so in one line (exit 1, not usage's 2).
	report := abs(reportArgs[0])
	help, _ := exec.Command(report, "--help").CombinedOutput()
	assert.Contains(t, string(help), fmt.Sprintf("(default %q)", "http://"+promListen), "the report reads the README's Prometheus by default")
	closed := fmt.Sprintf("http://127.0.0.1:%d", freePort(t))
	cmd := exec.Command(report, append(reportArgs[1:], "--prometheus="+closed)...)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if assert.ErrorAs(t, err, &exit, "%s", out) {
		assert.Equal(t, 1, exit.ExitCode(), "README: %s: the flags parse (usage exits 2)\n%s", strings.Join(reportArgs, " "), out)
	}
}

// TestStandaloneFilesOnLoopback: the standalone configs listen on, and
// send to, 127.0.0.1 only, and name the alerts' host.
func TestStandaloneFilesOnLoopback(t *testing.T) {
	for _, name := range []string{"collector.yaml", "prometheus.yml"} {
		data, err := os.ReadFile(filepath.Join(standaloneDir, name))
		require.NoError(t, err)
		for _, m := range regexp.MustCompile(`(?m)^[^#\n]*?\b(\d+\.\d+\.\d+\.\d+):\d+`).FindAllStringSubmatch(string(data), -1) {
			assert.Equal(t, "127.0.0.1", m[1], "%s: %s", name, m[0])
		}
	}
	data, err := os.ReadFile(filepath.Join(standaloneDir, "collector.yaml"))
	require.NoError(t, err)
	assert.Contains(t, string(data), "{key: host.name, value: \"${env:HOST_NAME:-}\", action: upsert}")
	assert.Regexp(t, `processors: \[resource, batch\]`, string(data))
}

// TestStandaloneStack runs the three on loopback ports as the standalone
// configs wire them (the simulated NVML under the collector): Prometheus
// loads the rendered rules (GPUHolderUnderused after values.yaml's 5
// minutes), scrapes the collector, whose series carry host_name from
// HOST_NAME, and finds the Alertmanager, which runs the shipped config.
func TestStandaloneStack(t *testing.T) {
	otelcol := binFlag(t, "otelcol", *otelcolPath)
	fake := binFlag(t, "fakenvml", *fakeNVMLPath)
	prometheus := tool(t, "prometheus", "prometheus")
	alertmanager := tool(t, "prometheus-alertmanager", "prometheus-alertmanager")
	dir := t.TempDir()
	abs := func(p string) string {
		a, err := filepath.Abs(filepath.Join(repoRoot, p))
		require.NoError(t, err)
		return a
	}

	// The rules with the standalone values, beside a prometheus.yml that
	// differs from the shipped one in its two ports only.
	out, err := makeIn(t, "rules-render", "VALUES=deploy/standalone/values.yaml", "OUT="+filepath.Join(dir, "rules.yaml"))
	require.NoError(t, err, "%s", out)
	colAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	amAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	promAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	shipped, err := os.ReadFile(filepath.Join(standaloneDir, "prometheus.yml"))
	require.NoError(t, err)
	config := strings.NewReplacer(`"127.0.0.1:8889"`, `"`+colAddr+`"`, `"127.0.0.1:9093"`, `"`+amAddr+`"`).Replace(string(shipped))
	require.Contains(t, config, colAddr)
	require.Contains(t, config, amAddr)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(config), 0o600))

	col := exec.Command(otelcol, "--config="+abs("deploy/standalone/collector.yaml"),
		"--set=receivers::nvml::library_path="+fake,
		"--set=exporters::prometheus::endpoint="+colAddr,
		fmt.Sprintf("--set=extensions::health_check::endpoint=127.0.0.1:%d", freePort(t)),
		fmt.Sprintf("--set=service::telemetry::metrics::readers=[{pull: {exporter: {prometheus: {host: 127.0.0.1, port: %d}}}}]", freePort(t)))
	col.Env = append(os.Environ(), "HOST_NAME=gpu-server-1", "FAKE_NVML_SCENARIO="+abs("testdata/scenarios/demo.json"))
	startUntilCleanup(t, col)
	am := exec.Command(alertmanager, "--config.file="+abs("deploy/alertmanager/alertmanager.yml"),
		"--web.listen-address="+amAddr, "--storage.path="+filepath.Join(dir, "alertmanager"), "--cluster.listen-address=")
	startUntilCleanup(t, am)
	prom := exec.Command(prometheus, "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--web.listen-address="+promAddr, "--storage.tsdb.path="+filepath.Join(dir, "prometheus"))
	startUntilCleanup(t, prom)

	api := func(path string, v any) error {
		resp, err := http.Get("http://" + promAddr + path)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s: HTTP %d", path, resp.StatusCode)
		}
		return json.NewDecoder(resp.Body).Decode(v)
	}
	eventually := func(what string, ok func() (bool, string)) {
		t.Helper()
		last := ""
		for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
			var done bool
			if done, last = ok(); done {
				return
			}
		}
		t.Errorf("%s: not within 60 s; last: %s", what, last)
	}

	eventually("Prometheus loads GPUHolderUnderused for 5 minutes", func() (bool, string) {
		var r struct {
			Data struct {
				Groups []struct {
					Rules []struct {
						Name     string  `json:"name"`
						Duration float64 `json:"duration"`
					} `json:"rules"`
				} `json:"groups"`
			} `json:"data"`
		}
		if err := api("/api/v1/rules", &r); err != nil {
			return false, err.Error()
		}
		for _, g := range r.Data.Groups {
			for _, rule := range g.Rules {
				if rule.Name == "GPUHolderUnderused" {
					return rule.Duration == 300, fmt.Sprintf("for %v s", rule.Duration)
				}
			}
		}
		return false, fmt.Sprintf("%d groups, no GPUHolderUnderused", len(r.Data.Groups))
	})
	eventually("Prometheus finds the Alertmanager", func() (bool, string) {
		var r struct {
			Data struct {
				Active []struct {
					URL string `json:"url"`
				} `json:"activeAlertmanagers"`
			} `json:"data"`
		}
		if err := api("/api/v1/alertmanagers", &r); err != nil {
			return false, err.Error()
		}
		return len(r.Data.Active) == 1 && strings.HasPrefix(r.Data.Active[0].URL, "http://"+amAddr+"/"), fmt.Sprint(r.Data.Active)
	})
	eventually("the collector's GPUs in Prometheus, named by host_name", func() (bool, string) {
		var r struct {
			Data struct {
				Result []struct {
					Metric map[string]string `json:"metric"`
				} `json:"result"`
			} `json:"data"`
		}
		q := url.Values{"query": {`count by (host_name, job) (hw_gpu_memory_limit_bytes)`}}
		if err := api("/api/v1/query?"+q.Encode(), &r); err != nil {
			return false, err.Error()
		}
		return len(r.Data.Result) == 1 && r.Data.Result[0].Metric["host_name"] == "gpu-server-1" && r.Data.Result[0].Metric["job"] == "otelcol-nvml",
			fmt.Sprint(r.Data.Result)
	})
}
