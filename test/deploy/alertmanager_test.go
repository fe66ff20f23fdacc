package deploy

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	monitoringv1alpha1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

// The standalone configuration, deploy/alertmanager/alertmanager.yml, as far
// as the chart must render the same: the route tree, the inhibitions and the
// receivers' names and addresses. Strict decoding: a key this test does not
// know fails, so that nothing the chart should mirror goes unchecked.
type amConfig struct {
	Global struct {
		SMTPSmarthost  string `json:"smtp_smarthost"`
		SMTPFrom       string `json:"smtp_from"`
		SMTPRequireTLS bool   `json:"smtp_require_tls"`
	} `json:"global"`
	Route     amRoute `json:"route"`
	Receivers []struct {
		Name         string `json:"name"`
		EmailConfigs []struct {
			To           string `json:"to"`
			SendResolved bool   `json:"send_resolved"`
		} `json:"email_configs"`
	} `json:"receivers"`
	InhibitRules []struct {
		SourceMatchers []string `json:"source_matchers"`
		TargetMatchers []string `json:"target_matchers"`
		Equal          []string `json:"equal"`
	} `json:"inhibit_rules"`
}

type amRoute struct {
	Receiver       string    `json:"receiver"`
	GroupBy        []string  `json:"group_by"`
	GroupWait      string    `json:"group_wait"`
	GroupInterval  string    `json:"group_interval"`
	RepeatInterval string    `json:"repeat_interval"`
	Matchers       []string  `json:"matchers"`
	Continue       bool      `json:"continue"`
	Routes         []amRoute `json:"routes"`
}

// routeView is one route of either form, as Alertmanager reads it.
type routeView struct {
	Receiver                                 string
	GroupBy, Matchers                        []string
	GroupWait, GroupInterval, RepeatInterval string
	Continue                                 bool
	Routes                                   []routeView
}

func standaloneView(r amRoute) routeView {
	v := routeView{Receiver: r.Receiver, GroupBy: r.GroupBy, Matchers: r.Matchers, GroupWait: r.GroupWait,
		GroupInterval: r.GroupInterval, RepeatInterval: r.RepeatInterval, Continue: r.Continue}
	for _, c := range r.Routes {
		v.Routes = append(v.Routes, standaloneView(c))
	}
	return v
}

func matcherStrings(t *testing.T, ms []monitoringv1alpha1.Matcher) []string {
	t.Helper()
	var out []string
	for _, m := range ms {
		assert.NoError(t, m.Validate(), "matcher %v", m)
		assert.NotEmpty(t, m.MatchType, "matcher %s: matchType (the deprecated regex field is not used)", m.Name)
		out = append(out, m.String())
	}
	return out
}

func durationString[T ~string](d *T) string {
	if d == nil {
		return ""
	}
	return string(*d)
}

// chartView reads an AlertmanagerConfig route; its child routes are free
// JSON in the type, so each is decoded strictly here.
func chartView(t *testing.T, r monitoringv1alpha1.Route) routeView {
	t.Helper()
	v := routeView{Receiver: r.Receiver, GroupBy: r.GroupBy, Matchers: matcherStrings(t, r.Matchers),
		GroupWait: durationString(r.GroupWait), GroupInterval: durationString(r.GroupInterval),
		RepeatInterval: durationString(r.RepeatInterval), Continue: r.Continue}
	for i, raw := range r.Routes {
		var c monitoringv1alpha1.Route
		require.NoError(t, yaml.UnmarshalStrict(raw.Raw, &c), "child route %d of %v does not decode strictly into the operator's Route: %s", i, r.Matchers, raw.Raw)
		v.Routes = append(v.Routes, chartView(t, c))
	}
	return v
}

func renderedAlertmanagerConfig(t *testing.T, args ...string) *monitoringv1alpha1.AlertmanagerConfig {
	t.Helper()
	amcs := only[monitoringv1alpha1.AlertmanagerConfig](t, decodeAll(t, helmTemplate(t, args...)))
	require.Len(t, amcs, 1, "one AlertmanagerConfig")
	return amcs[0]
}

// TestAlertmanagerConfig: the chart's AlertmanagerConfig, with the defaults
// and alertmanagerConfig.enabled, is deploy/alertmanager/alertmanager.yml:
// the same route tree (receivers, grouping, timings, matchers), the same
// inhibitions, the same receivers and addresses. It decodes strictly into
// the operator's v1alpha1 types, child routes included; it is off by
// default; a team or receiver name that no receiver has fails the render,
// naming the field.
func TestAlertmanagerConfig(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(repoRoot, "deploy", "alertmanager", "alertmanager.yml"))
	require.NoError(t, err)
	var standalone amConfig
	require.NoError(t, yaml.UnmarshalStrict(data, &standalone), "deploy/alertmanager/alertmanager.yml")

	assert.Empty(t, only[monitoringv1alpha1.AlertmanagerConfig](t, decodeAll(t, helmTemplate(t))), "off by default")

	amc := renderedAlertmanagerConfig(t, "--set", "alertmanagerConfig.enabled=true")
	assert.Equal(t, "monitoring", amc.Namespace, "the release's namespace by default")
	require.NotNil(t, amc.Spec.Route)
	want, err := json.MarshalIndent(standaloneView(standalone.Route), "", "  ")
	require.NoError(t, err)
	got, err := json.MarshalIndent(chartView(t, *amc.Spec.Route), "", "  ")
	require.NoError(t, err)
	assert.JSONEq(t, string(want), string(got), "the chart's route tree differs from deploy/alertmanager/alertmanager.yml's")

	require.Len(t, amc.Spec.InhibitRules, len(standalone.InhibitRules))
	for i, r := range standalone.InhibitRules {
		c := amc.Spec.InhibitRules[i]
		assert.Equal(t, r.SourceMatchers, matcherStrings(t, c.SourceMatch), "inhibition %d: source", i)
		assert.Equal(t, r.TargetMatchers, matcherStrings(t, c.TargetMatch), "inhibition %d: target", i)
		assert.Equal(t, r.Equal, c.Equal, "inhibition %d: equal", i)
	}

	type email struct {
		To           string
		SendResolved bool
	}
	wantReceivers, gotReceivers := map[string][]email{}, map[string][]email{}
	for _, r := range standalone.Receivers {
		for _, e := range r.EmailConfigs {
			wantReceivers[r.Name] = append(wantReceivers[r.Name], email{e.To, e.SendResolved})
		}
	}
	for _, r := range amc.Spec.Receivers {
		for _, e := range r.EmailConfigs {
			require.NotNil(t, e.To, "receiver %s: to", r.Name)
			gotReceivers[r.Name] = append(gotReceivers[r.Name], email{*e.To, e.SendResolved != nil && *e.SendResolved})
		}
	}
	assert.Equal(t, wantReceivers, gotReceivers, "the receivers and their addresses")

	// A values file with its own teams and receivers (ci/alertmanager-values.yaml).
	amc = renderedAlertmanagerConfig(t, "-f", filepath.Join(chartDir, "ci", "alertmanager-values.yaml"))
	assert.Equal(t, "monitoring-system", amc.Namespace)
	assert.Equal(t, "gpu", amc.Labels["alertmanagerConfig"])
	holders := chartView(t, *amc.Spec.Route).Routes[0]
	assert.Equal(t, "12h", holders.RepeatInterval)
	require.Len(t, holders.Routes, 2, "one team and the user route")
	assert.Equal(t, []string{`k8s_namespace_name=~"research-.+"`}, holders.Routes[0].Matchers)
	assert.Equal(t, "research", holders.Routes[0].Receiver)
	assert.Equal(t, "gpu-user", holders.Routes[1].Receiver)

	// Names that are not receivers.
	for _, c := range []struct{ set, want string }{
		{"alertmanagerConfig.teams[0].receiver=nobody,alertmanagerConfig.teams[0].namespaces=x", `alertmanagerConfig.teams[0].receiver: "nobody" is not the name of one of alertmanagerConfig.receivers`},
		{"alertmanagerConfig.userReceiver=users", `alertmanagerConfig.userReceiver: "users" is not the name`},
		{"alertmanagerConfig.platformReceiver=ops", `alertmanagerConfig.platformReceiver: "ops" is not the name`},
	} {
		out, ok := helmResult(t, "template", "otelcol-nvml", chartDir, "--kube-version", kubeVersion,
			"--set", "alertmanagerConfig.enabled=true,"+c.set)
		assert.False(t, ok, "--set %s renders", c.set)
		assert.Contains(t, out, c.want, "--set %s", c.set)
	}
}
