package deploy

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

// kubeVersion is the Kubernetes version the chart is rendered for (helm
// built with go install assumes v1.20, below the chart's kubeVersion).
const kubeVersion = "1.34.0"

// valueSets are the chart's test values: the defaults and every file in
// the chart's ci/ folder.
func valueSets(t *testing.T) map[string][]string {
	t.Helper()
	sets := map[string][]string{"defaults": nil}
	files, err := filepath.Glob(filepath.Join(chartDir, "ci", "*-values.yaml"))
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(files), 3, "the chart needs at least 3 values files under ci/")
	for _, f := range files {
		sets[strings.TrimSuffix(filepath.Base(f), "-values.yaml")] = []string{"-f", f}
	}
	return sets
}

func helmTemplate(t *testing.T, args ...string) []byte {
	t.Helper()
	helm := binFlag(t, "helm", *helmPath)
	return run(t, helm, append([]string{"template", "otelcol-nvml", chartDir, "--namespace", "monitoring", "--kube-version", kubeVersion}, args...)...)
}

// collectorConfig is the part of the rendered collector config the checks read.
type collectorConfig struct {
	Receivers  map[string]map[string]any `json:"receivers"`
	Processors map[string]any            `json:"processors"`
	Exporters  map[string]map[string]any `json:"exporters"`
	Extensions struct {
		HealthCheck map[string]any `json:"health_check"`
	} `json:"extensions"`
	Service struct {
		Pipelines map[string]struct {
			Receivers  []string `json:"receivers"`
			Processors []string `json:"processors"`
			Exporters  []string `json:"exporters"`
		} `json:"pipelines"`
	} `json:"service"`
}

func TestChart(t *testing.T) {
	helm := binFlag(t, "helm", *helmPath)
	for name, args := range valueSets(t) {
		t.Run(name, func(t *testing.T) {
			run(t, helm, append([]string{"lint", "--strict", "--kube-version", kubeVersion, chartDir}, args...)...)
			objs := decodeAll(t, helmTemplate(t, args...))
			values := chartValues(t, args)
			checkDaemonSet(t, objs, values)
		})
	}
}

// chartValues reads the defaults overlaid with a values file, as far as the
// checks need them.
type testValues struct {
	Attribution struct {
		Enabled           bool `json:"enabled"`
		K8sattributes     bool `json:"k8sattributes"`
		DRAResourceSlices bool `json:"draResourceSlices"`
	} `json:"attribution"`
	OTLP struct {
		Enabled  bool   `json:"enabled"`
		Protocol string `json:"protocol"`
	} `json:"otlp"`
	Prometheus struct {
		Enabled        bool `json:"enabled"`
		Port           int  `json:"port"`
		ServiceMonitor struct {
			Enabled bool `json:"enabled"`
		} `json:"serviceMonitor"`
	} `json:"prometheus"`
	HealthCheck struct {
		Port            int  `json:"port"`
		ComponentStatus bool `json:"componentStatus"`
	} `json:"healthCheck"`
	PrometheusRule struct {
		Enabled bool `json:"enabled"`
	} `json:"prometheusRule"`
	ExtraReceivers  map[string]any `json:"extraReceivers"`
	ExtraProcessors map[string]any `json:"extraProcessors"`
	ExtraExporters  map[string]any `json:"extraExporters"`
}

func chartValues(t *testing.T, args []string) testValues {
	t.Helper()
	var v testValues
	files := []string{filepath.Join(chartDir, "values.yaml")}
	if len(args) == 2 {
		files = append(files, args[1])
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		require.NoError(t, yaml.Unmarshal(data, &v), f)
	}
	return v
}

func checkDaemonSet(t *testing.T, objs []object, v testValues) {
	dss := only[appsv1.DaemonSet](t, objs)
	require.Len(t, dss, 1)
	ds := dss[0]
	pod := ds.Spec.Template.Spec
	require.Len(t, pod.Containers, 1)
	c := pod.Containers[0]

	// The GPU settings: every GPU, none taken.
	env := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		env[e.Name] = e
	}
	assert.Equal(t, "all", env["NVIDIA_VISIBLE_DEVICES"].Value)
	assert.Equal(t, "status.podIP", env["POD_IP"].ValueFrom.FieldRef.FieldPath)
	for _, rl := range []corev1.ResourceList{c.Resources.Requests, c.Resources.Limits} {
		_, gpu := rl["nvidia.com/gpu"]
		assert.False(t, gpu, "the collector must not request a GPU")
	}
	assert.NotEmpty(t, c.Resources.Limits.Memory().String())
	tolerated := false
	for _, tol := range pod.Tolerations {
		if tol.Key == "nvidia.com/gpu" && tol.Operator == corev1.TolerationOpExists {
			tolerated = true
		}
	}
	assert.True(t, tolerated, "no toleration for the nvidia.com/gpu taint")

	// Security: root only with attribution, nothing else ever.
	sc := c.SecurityContext
	require.NotNil(t, sc)
	assert.False(t, *sc.AllowPrivilegeEscalation)
	assert.True(t, *sc.ReadOnlyRootFilesystem)
	assert.Equal(t, []corev1.Capability{"ALL"}, sc.Capabilities.Drop)
	assert.Empty(t, sc.Capabilities.Add)
	psc := pod.SecurityContext
	assert.Equal(t, corev1.SeccompProfileTypeRuntimeDefault, psc.SeccompProfile.Type)
	assert.False(t, pod.HostPID || pod.HostNetwork || pod.HostIPC, "no host namespaces")
	mounts := map[string]corev1.VolumeMount{}
	for _, m := range c.VolumeMounts {
		mounts[m.Name] = m
		assert.True(t, m.ReadOnly, "mount %s must be read-only", m.Name)
	}
	hostPaths := map[string]string{}
	for _, vol := range pod.Volumes {
		if vol.HostPath != nil {
			hostPaths[vol.Name] = vol.HostPath.Path
		}
	}
	if v.Attribution.Enabled {
		assert.Equal(t, int64(0), *psc.RunAsUser)
		assert.Equal(t, map[string]string{"host-proc": "/proc", "host-cgroup": "/sys/fs/cgroup",
			"pod-resources": "/var/lib/kubelet/pod-resources"}, hostPaths)
	} else {
		assert.Equal(t, int64(65532), *psc.RunAsUser)
		assert.True(t, *psc.RunAsNonRoot)
		assert.Empty(t, hostPaths, "attribution off mounts nothing from the host (Pod Security restricted)")
	}

	// The config: from the ConfigMap the pod mounts, valid for the binary
	// with the pod's arguments.
	var cm *corev1.ConfigMap
	for _, o := range only[corev1.ConfigMap](t, objs) {
		if o.Name == pod.Volumes[0].ConfigMap.Name {
			cm = o
		}
	}
	require.NotNil(t, cm, "the ConfigMap the DaemonSet mounts is not rendered")
	raw := cm.Data["collector.yaml"]
	require.NotEmpty(t, raw)
	assert.Contains(t, c.Args, "--config="+mounts["config"].MountPath+"/collector.yaml")
	validateConfig(t, "the chart's collector config", raw, c.Args)
	var cfg collectorConfig
	require.NoError(t, yaml.Unmarshal([]byte(raw), &cfg))

	nvml := cfg.Receivers["nvml"]
	if v.Attribution.Enabled {
		procs, _ := nvml["processes"].(map[string]any)
		assert.Equal(t, mounts["host-proc"].MountPath, procs["proc_root"], "proc_root is where the host's /proc is mounted")
		assert.Equal(t, mounts["host-cgroup"].MountPath, procs["cgroup_root"], "cgroup_root is where the host's cgroups are mounted")
		k8s, _ := nvml["kubernetes"].(map[string]any)
		assert.Equal(t, mounts["pod-resources"].MountPath+"/kubelet.sock", k8s["pod_resources_socket"])
		// The node's ResourceSlices, by the downward API's node name.
		assert.Equal(t, "${env:K8S_NODE_NAME}", k8s["node_name"])
		dra, _ := k8s["dra"].(map[string]any)
		rs, _ := dra["resource_slices"].(map[string]any)
		assert.Equal(t, v.Attribution.DRAResourceSlices, rs["enabled"], "kubernetes::dra::resource_slices::enabled follows draResourceSlices")
	} else {
		assert.NotContains(t, nvml, "processes")
		assert.NotContains(t, nvml, "kubernetes")
	}

	// Probes: health_check on the pod IP, on the port the probes name.
	hc := cfg.Extensions.HealthCheck
	endpoint, path := "", ""
	if v.HealthCheck.ComponentStatus {
		assert.Contains(t, c.Args, "--feature-gates=+extension.healthcheck.useComponentStatus")
		http, _ := hc["http"].(map[string]any)
		endpoint, _ = http["endpoint"].(string)
		status, _ := http["status"].(map[string]any)
		path, _ = status["path"].(string)
		ch, _ := hc["component_health"].(map[string]any)
		assert.Equal(t, true, ch["include_permanent_errors"])
	} else {
		endpoint, _ = hc["endpoint"].(string)
		path, _ = hc["path"].(string)
	}
	assert.True(t, strings.HasPrefix(endpoint, "${env:POD_IP}:"), "health_check must listen on the pod IP (the kubelet cannot reach 127.0.0.1): %q", endpoint)
	healthPort := containerPort(t, c, "health")
	assert.Equal(t, endpoint, "${env:POD_IP}:"+itoa(healthPort))
	for _, probe := range []*corev1.Probe{c.LivenessProbe, c.ReadinessProbe} {
		require.NotNil(t, probe)
		require.NotNil(t, probe.HTTPGet)
		assert.Equal(t, "health", probe.HTTPGet.Port.String())
		assert.Equal(t, path, probe.HTTPGet.Path)
	}

	// Pipelines: every extra component is in the metrics pipeline.
	metrics := cfg.Service.Pipelines["metrics"]
	for name := range v.ExtraReceivers {
		assert.Contains(t, metrics.Receivers, name)
	}
	for name := range v.ExtraProcessors {
		assert.Contains(t, metrics.Processors, name)
	}
	for name := range v.ExtraExporters {
		assert.Contains(t, metrics.Exporters, name)
	}
	assert.Equal(t, "batch", metrics.Processors[len(metrics.Processors)-1], "batch goes last")
	assert.Equal(t, "memory_limiter", metrics.Processors[0], "memory_limiter goes first")
	// k8s.node.name (the dashboard's node variable) comes from the downward
	// API, inserted where a resource lacks it.
	assert.Contains(t, metrics.Processors, "resource")
	assert.Equal(t, []any{map[string]any{"key": "k8s.node.name", "value": "${env:K8S_NODE_NAME}", "action": "insert"}},
		cfg.Processors["resource"].(map[string]any)["attributes"])
	nodeName := false
	for _, e := range c.Env {
		if e.Name == "K8S_NODE_NAME" {
			nodeName = e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "spec.nodeName"
		}
	}
	assert.True(t, nodeName, "K8S_NODE_NAME comes from spec.nodeName")
	if v.OTLP.Enabled {
		exp := map[string]string{"grpc": "otlp_grpc", "http": "otlp_http"}[v.OTLP.Protocol]
		assert.Contains(t, metrics.Exporters, exp)
		tls, _ := cfg.Exporters[exp]["tls"].(map[string]any)
		assert.Equal(t, false, tls["insecure"], "TLS is on unless asked")
		assert.Contains(t, cfg.Service.Pipelines["logs"].Exporters, exp, "GPU events go out as logs")
	}

	// k8sattributes: in the pipeline, with its RBAC and the API token;
	// the ResourceSlices (DRA): their RBAC and the token.
	k8sattr := v.Attribution.Enabled && v.Attribution.K8sattributes
	draSlices := v.Attribution.Enabled && v.Attribution.DRAResourceSlices
	assert.Equal(t, k8sattr, slices.Contains(metrics.Processors, "k8s_attributes"))
	assert.Equal(t, k8sattr || draSlices, *pod.AutomountServiceAccountToken)
	roles := only[rbacv1.ClusterRole](t, objs)
	bindings := only[rbacv1.ClusterRoleBinding](t, objs)
	if k8sattr || draSlices {
		require.Len(t, roles, 1)
		require.Len(t, bindings, 1)
		assert.Equal(t, pod.ServiceAccountName, bindings[0].Subjects[0].Name)
		granted := map[string]bool{}
		for _, r := range roles[0].Rules {
			assert.Subset(t, []string{"get", "list", "watch"}, r.Verbs, "read-only RBAC")
			assert.ElementsMatch(t, []string{"get", "list", "watch"}, r.Verbs)
			for _, g := range r.APIGroups {
				for _, res := range r.Resources {
					granted[g+"/"+res] = true
				}
			}
		}
		assert.Equal(t, k8sattr, granted["/pods"], "pods for k8sattributes")
		assert.Equal(t, draSlices, granted["resource.k8s.io/resourceslices"], "resourceslices for DRA")
	} else {
		assert.Empty(t, roles)
		assert.Empty(t, bindings)
	}

	// Prometheus: the port, the Service and ServiceMonitor on it.
	services := only[corev1.Service](t, objs)
	monitors := only[monitoringv1.ServiceMonitor](t, objs)
	if v.Prometheus.Enabled {
		assert.Equal(t, v.Prometheus.Port, containerPort(t, c, "metrics"))
		assert.Equal(t, "${env:POD_IP}:"+itoa(v.Prometheus.Port), cfg.Exporters["prometheus"]["endpoint"])
		require.Len(t, services, 1)
		assert.Equal(t, "metrics", services[0].Spec.Ports[0].TargetPort.String())
	} else {
		assert.Empty(t, services)
	}
	if v.Prometheus.ServiceMonitor.Enabled {
		require.Len(t, monitors, 1)
		assert.Equal(t, "metrics", monitors[0].Spec.Endpoints[0].Port)
	} else {
		assert.Empty(t, monitors)
	}
	assert.Len(t, only[monitoringv1.PrometheusRule](t, objs), map[bool]int{true: 1}[v.PrometheusRule.Enabled])
}

func containerPort(t *testing.T, c corev1.Container, name string) int {
	t.Helper()
	for _, p := range c.Ports {
		if p.Name == name {
			return int(p.ContainerPort)
		}
	}
	t.Fatalf("container port %q not found", name)
	return 0
}

func itoa(i int) string { return strconv.Itoa(i) }
