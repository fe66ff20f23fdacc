package deploy

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"sigs.k8s.io/yaml"
)

// TestTrainingJob: the training-pod recipe decodes strictly, its sidecar
// config validates, and it does what its comment says.
func TestTrainingJob(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(repoRoot, "deploy", "kubernetes", "training-job.yaml"))
	require.NoError(t, err)
	objs := decodeAll(t, data)
	jobs := only[batchv1.Job](t, objs)
	require.Len(t, jobs, 1)
	pod := jobs[0].Spec.Template.Spec
	templates := only[resourcev1.ResourceClaimTemplate](t, objs)
	require.Len(t, templates, 1)

	assert.True(t, *pod.ShareProcessNamespace, "the sidecar sees the trainer's processes")
	require.Len(t, pod.ResourceClaims, 1)
	claim := pod.ResourceClaims[0]
	assert.Equal(t, templates[0].Name, *claim.ResourceClaimTemplateName)

	require.Len(t, pod.InitContainers, 1)
	sidecar := pod.InitContainers[0]
	require.NotNil(t, sidecar.RestartPolicy)
	assert.Equal(t, corev1.ContainerRestartPolicyAlways, *sidecar.RestartPolicy, "a native sidecar, so the Job completes")
	require.Len(t, pod.Containers, 1)
	trainer := pod.Containers[0]
	// Only the pod's GPUs: the sidecar shares the trainer's claim, and takes
	// no other GPU.
	claimNames := func(c corev1.Container) []string {
		var out []string
		for _, rc := range c.Resources.Claims {
			out = append(out, rc.Name)
		}
		return out
	}
	assert.Equal(t, []string{claim.Name}, claimNames(sidecar))
	assert.Equal(t, []string{claim.Name}, claimNames(trainer))
	env := map[string]corev1.EnvVar{}
	for _, e := range sidecar.Env {
		env[e.Name] = e
	}
	assert.NotContains(t, env, "NVIDIA_VISIBLE_DEVICES", "visibility comes from the claim, not from all")
	for name, path := range map[string]string{"K8S_POD_NAME": "metadata.name", "K8S_NAMESPACE_NAME": "metadata.namespace", "K8S_POD_UID": "metadata.uid", "K8S_NODE_NAME": "spec.nodeName"} {
		require.Contains(t, env, name)
		assert.Equal(t, path, env[name].ValueFrom.FieldRef.FieldPath, name)
	}
	assert.True(t, *sidecar.SecurityContext.RunAsNonRoot)
	assert.True(t, *sidecar.SecurityContext.ReadOnlyRootFilesystem)

	var cm *corev1.ConfigMap
	for _, c := range only[corev1.ConfigMap](t, objs) {
		if c.Name == pod.Volumes[0].ConfigMap.Name {
			cm = c
		}
	}
	require.NotNil(t, cm)
	raw := cm.Data["collector.yaml"]
	validateConfig(t, "the training job's sidecar config", raw, sidecar.Args)
	var cfg collectorConfig
	require.NoError(t, yaml.Unmarshal([]byte(raw), &cfg))
	assert.Contains(t, cfg.Service.Pipelines["metrics"].Exporters, "otlp_grpc", "it exports OTLP")
	// The downward API's attributes reach every resource that lacks them.
	for _, pipeline := range []string{"metrics", "logs"} {
		assert.Contains(t, cfg.Service.Pipelines[pipeline].Processors, "resource", pipeline)
	}
	assert.ElementsMatch(t, []any{
		map[string]any{"key": "k8s.pod.name", "value": "${env:K8S_POD_NAME}", "action": "insert"},
		map[string]any{"key": "k8s.namespace.name", "value": "${env:K8S_NAMESPACE_NAME}", "action": "insert"},
		map[string]any{"key": "k8s.pod.uid", "value": "${env:K8S_POD_UID}", "action": "insert"},
		map[string]any{"key": "k8s.node.name", "value": "${env:K8S_NODE_NAME}", "action": "insert"},
	}, cfg.Processors["resource"].(map[string]any)["attributes"])
	assert.Contains(t, cfg.Exporters, "otlp_grpc")
}

// dockerRun returns the arguments of the `docker run` command in a shell
// script (continuation lines joined).
func dockerRun(t *testing.T, script string) []string {
	t.Helper()
	joined := strings.ReplaceAll(script, "\\\n", " ")
	for _, line := range strings.Split(joined, "\n") {
		line = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "exec "))
		if strings.HasPrefix(line, "docker run ") {
			require.NotContains(t, line, `"`, "keep the command free of quotes (this check splits on spaces)")
			require.NotContains(t, line, `'`)
			return strings.Fields(line)[2:]
		}
	}
	t.Fatal("no docker run command")
	return nil
}

// TestDockerRun: the plain-Docker command uses flags docker knows, takes
// every GPU through the toolkit without privilege, runs the image's default
// config (validated with the command's environment), publishes the ports
// that config serves, and is the one the README shows.
func TestDockerRun(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(repoRoot, "deploy", "docker", "run.sh"))
	require.NoError(t, err)
	args := dockerRun(t, string(data))

	withValue := map[string]bool{"--name": true, "--restart": true, "--gpus": true, "--pid": true, "--cgroupns": true,
		"--cap-drop": true, "--security-opt": true, "-e": true, "-p": true}
	boolean := map[string]bool{"--detach": true, "--read-only": true}
	flags := map[string][]string{}
	var image string
	var command []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case withValue[a]:
			require.Less(t, i+1, len(args), "%s needs a value", a)
			flags[a] = append(flags[a], args[i+1])
			i++
		case boolean[a]:
			flags[a] = append(flags[a], "true")
		case strings.HasPrefix(a, "-"):
			t.Fatalf("docker run flag %s is not one this check knows; add it with care", a)
		default:
			image, command = a, args[i+1:]
			i = len(args)
		}
	}
	assert.Equal(t, []string{"all"}, flags["--gpus"])
	assert.Equal(t, []string{"host"}, flags["--pid"], "NVML's host PIDs resolve")
	assert.Equal(t, []string{"ALL"}, flags["--cap-drop"])
	assert.Contains(t, flags, "--read-only")
	assert.NotContains(t, args, "--privileged")
	assert.NotContains(t, args, "--user", "the image's non-root user")

	builder, err := os.ReadFile(filepath.Join(repoRoot, "builder-config.yaml"))
	require.NoError(t, err)
	version := regexp.MustCompile(`(?m)^  version: (\S+)`).FindSubmatch(builder)
	require.NotNil(t, version)
	values, err := os.ReadFile(filepath.Join(chartDir, "values.yaml"))
	require.NoError(t, err)
	var v struct {
		Image struct {
			Repository string `json:"repository"`
		} `json:"image"`
	}
	require.NoError(t, yaml.Unmarshal(values, &v))
	assert.Equal(t, v.Image.Repository+":"+string(version[1]), image, "the published image the chart defaults to, at the project's version")
	assert.Empty(t, command, "the image's default command and config")

	env := []string{}
	for _, e := range flags["-e"] {
		require.Contains(t, e, "=")
		env = append(env, e)
	}
	config, err := os.ReadFile(filepath.Join(repoRoot, "deploy", "image", "config.yaml"))
	require.NoError(t, err)
	validateConfigEnv(t, "the image's default config under docker run", string(config), env)
	// Published ports: the config's defaults, on the host's loopback only.
	for _, p := range flags["-p"] {
		assert.True(t, strings.HasPrefix(p, "127.0.0.1:"), "publish %s on loopback only", p)
		port := p[strings.LastIndex(p, ":")+1:]
		assert.Contains(t, string(config), ":-"+port+"}", "the config serves port %s by default", port)
	}

	readme, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	require.NoError(t, err)
	assert.Equal(t, args, dockerRun(t, string(readme)), "the README's docker run is deploy/docker/run.sh's")
}
