package deploy

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	monitoringv1alpha1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"sigs.k8s.io/yaml"
)

var (
	helmPath     = flag.String("helm", "", "path of the helm binary (make deploy-check pins it)")
	otelcolPath  = flag.String("otelcol", "", "path of the built otelcol-nvml, for `validate`")
	fakeNVMLPath = flag.String("fakenvml", "", "path of the simulated libnvidia-ml.so.1 (make fakenvml), for the health check")
	update       = flag.Bool("update", false, "rewrite the committed renderings (deploy/kubernetes/otelcol-nvml.yaml, deploy/prometheus/rules.yaml) from the chart")
)

// repoRoot is the repository's root, two levels up from this package.
const repoRoot = "../.."

var chartDir = filepath.Join(repoRoot, "deploy", "helm", "otelcol-nvml")

func binFlag(t *testing.T, name, val string) string {
	t.Helper()
	if val == "" {
		t.Fatalf("-%s is required (see the package comment)", name)
	}
	p, err := filepath.Abs(val)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("-%s: %v", name, err)
	}
	return p
}

func run(t *testing.T, bin string, args ...string) []byte {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\n%s%s", filepath.Base(bin), strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.Bytes()
}

// object is one rendered manifest, decoded into its official type.
type object struct {
	kind, name string
	raw        []byte
	value      any
}

// newObject returns a pointer to the official Go type of apiVersion/kind;
// nil for a kind this chart must not render.
func newObject(apiVersion, kind string) any {
	switch apiVersion + "/" + kind {
	case "v1/ConfigMap":
		return &corev1.ConfigMap{}
	case "v1/ServiceAccount":
		return &corev1.ServiceAccount{}
	case "v1/Service":
		return &corev1.Service{}
	case "v1/Secret":
		return &corev1.Secret{}
	case "apps/v1/DaemonSet":
		return &appsv1.DaemonSet{}
	case "resource.k8s.io/v1/ResourceClaimTemplate":
		return &resourcev1.ResourceClaimTemplate{}
	case "batch/v1/Job":
		return &batchv1.Job{}
	case "rbac.authorization.k8s.io/v1/ClusterRole":
		return &rbacv1.ClusterRole{}
	case "rbac.authorization.k8s.io/v1/ClusterRoleBinding":
		return &rbacv1.ClusterRoleBinding{}
	case "monitoring.coreos.com/v1/ServiceMonitor":
		return &monitoringv1.ServiceMonitor{}
	case "monitoring.coreos.com/v1/PrometheusRule":
		return &monitoringv1.PrometheusRule{}
	case "monitoring.coreos.com/v1alpha1/AlertmanagerConfig":
		return &monitoringv1alpha1.AlertmanagerConfig{}
	}
	return nil
}

// decodeAll splits a multi-document YAML stream and decodes each document
// strictly (unknown or duplicate fields fail) into its official type.
func decodeAll(t *testing.T, stream []byte) []object {
	t.Helper()
	var out []object
	for i, doc := range splitYAML(stream) {
		var head struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Metadata   struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal(doc, &head); err != nil {
			t.Fatalf("document %d: %v\n%s", i, err, doc)
		}
		v := newObject(head.APIVersion, head.Kind)
		if v == nil {
			t.Fatalf("document %d: %s %s: no official type known here; add it to newObject", i, head.APIVersion, head.Kind)
		}
		if err := yaml.UnmarshalStrict(doc, v); err != nil {
			t.Fatalf("%s %s does not decode strictly into %T: %v\n%s", head.Kind, head.Metadata.Name, v, err, doc)
		}
		out = append(out, object{kind: head.Kind, name: head.Metadata.Name, raw: doc, value: v})
	}
	return out
}

// splitYAML cuts a stream at "---" lines and drops documents that hold
// only comments or nothing.
func splitYAML(stream []byte) [][]byte {
	var docs [][]byte
	for _, d := range bytes.Split(append([]byte("\n"), stream...), []byte("\n---")) {
		meaningful := false
		for _, l := range strings.Split(string(d), "\n") {
			l = strings.TrimSpace(l)
			if l != "" && !strings.HasPrefix(l, "#") {
				meaningful = true
				break
			}
		}
		if meaningful {
			docs = append(docs, bytes.TrimLeft(d, "\n"))
		}
	}
	return docs
}

func only[T any](t *testing.T, objs []object) []*T {
	t.Helper()
	var out []*T
	for _, o := range objs {
		if v, ok := o.value.(*T); ok {
			out = append(out, v)
		}
	}
	return out
}

// validateConfig runs `otelcol-nvml validate` on a collector config, with
// the feature gates and the environment the pod gives it.
func validateConfig(t *testing.T, what, config string, args []string) {
	t.Helper()
	validateConfigEnv(t, what, config, nil, args...)
}

// validateConfigEnv is validateConfig with extra environment variables.
func validateConfigEnv(t *testing.T, what, config string, env []string, args ...string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "collector.yaml")
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	cmdArgs := []string{"validate", "--config=" + path}
	for _, a := range args {
		if strings.HasPrefix(a, "--feature-gates=") {
			cmdArgs = append(cmdArgs, a)
		}
	}
	cmd := exec.Command(binFlag(t, "otelcol", *otelcolPath), cmdArgs...)
	cmd.Env = append(os.Environ(), "POD_IP=127.0.0.1", "K8S_NODE_NAME=node-1", "OTEL_EXPORTER_OTLP_ENDPOINT=127.0.0.1:4317",
		"OTLP_TOKEN=t", "K8S_POD_NAME=p", "K8S_NAMESPACE_NAME=n", "K8S_POD_UID=00000000-0000-0000-0000-000000000000")
	cmd.Env = append(cmd.Env, env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: otelcol-nvml %s: %v\n%s\n---- config ----\n%s", what, strings.Join(cmdArgs, " "), err, out, config)
	}
}

// checkRendering compares a committed file with what the chart renders, or
// rewrites it under -update.
func checkRendering(t *testing.T, path string, want []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, want, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from what the chart renders; run `make deploy-generate` and commit.\n%s", path, lineDiff(string(got), string(want)))
	}
}

// lineDiff shows the first lines that differ.
func lineDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	var sb strings.Builder
	n := 0
	for i := 0; i < len(al) || i < len(bl); i++ {
		var x, y string
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if x != y {
			fmt.Fprintf(&sb, "line %d:\n  committed: %s\n  rendered:  %s\n", i+1, x, y)
			if n++; n == 10 {
				break
			}
		}
	}
	return sb.String()
}
