package deploy

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// unitFile is a systemd unit's [Service] settings, each key's values in order.
type unitFile map[string][]string

func readUnit(t *testing.T, path string) unitFile {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	u := unitFile{}
	section := ""
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "["):
			section = line
		case section == "[Service]":
			k, v, ok := strings.Cut(line, "=")
			require.True(t, ok, "unit line %q", line)
			u[k] = append(u[k], v)
		}
	}
	return u
}

func (u unitFile) one(t *testing.T, key string) string {
	t.Helper()
	require.Len(t, u[key], 1, "the unit's %s=", key)
	return u[key][0]
}

// environment is what systemd gives ExecStart: Environment= lines, then
// the EnvironmentFile= (its KEY=VALUE lines) under root when it exists.
func (u unitFile) environment(t *testing.T, root string) map[string]string {
	t.Helper()
	env := map[string]string{}
	for _, e := range u["Environment"] {
		k, v, _ := strings.Cut(e, "=")
		env[k] = v
	}
	for _, f := range u["EnvironmentFile"] {
		optional := strings.HasPrefix(f, "-")
		data, err := os.ReadFile(filepath.Join(root, strings.TrimPrefix(f, "-")))
		if optional && os.IsNotExist(err) {
			continue
		}
		require.NoError(t, err)
		for _, line := range strings.Split(string(data), "\n") {
			line = strings.TrimSpace(line)
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			k, v, ok := strings.Cut(line, "=")
			require.True(t, ok, "%s: line %q", f, line)
			env[k] = v
		}
	}
	return env
}

// execStart expands ExecStart as systemd does: ${NAME} inside a word, and
// a word $NAME split at white space into words (none when empty).
func (u unitFile) execStart(t *testing.T, env map[string]string) []string {
	t.Helper()
	var argv []string
	braced := regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)
	for _, w := range strings.Fields(u.one(t, "ExecStart")) {
		if name, ok := strings.CutPrefix(w, "$"); ok && !strings.HasPrefix(name, "{") {
			argv = append(argv, strings.Fields(env[name])...)
			continue
		}
		argv = append(argv, braced.ReplaceAllStringFunc(w, func(m string) string { return env[m[2:len(m)-1]] }))
	}
	return argv
}

// TestPackageUnit checks the unit the package ships for what NVML needs and
// the hardening, setting by setting (systemd-analyze security scores it in
// TestPackageDebInstall).
func TestPackageUnit(t *testing.T) {
	u := readUnit(t, filepath.Join(repoRoot, "deploy", "packages", "otelcol-nvml.service"))
	assert.Equal(t, "otelcol-nvml", u.one(t, "User"))
	assert.Equal(t, "otelcol-nvml", u.one(t, "Group"))
	assert.Equal(t, []string{"-/etc/otelcol-nvml/otelcol-nvml.conf"}, u["EnvironmentFile"], "optional")
	for k, want := range map[string]string{
		"DevicePolicy":            "closed",
		"NoNewPrivileges":         "yes",
		"CapabilityBoundingSet":   "",
		"AmbientCapabilities":     "",
		"ProtectSystem":           "strict",
		"ProtectHome":             "yes",
		"PrivateTmp":              "yes",
		"ProtectKernelTunables":   "yes",
		"ProtectKernelModules":    "yes",
		"ProtectControlGroups":    "yes",
		"RestrictAddressFamilies": "AF_UNIX AF_INET AF_INET6",
		"MemoryDenyWriteExecute":  "yes",
	} {
		assert.Equal(t, want, u.one(t, k), "%s=", k)
	}
	// The GPUs' device nodes, whatever the driver calls their majors.
	assert.Equal(t, []string{"char-nvidia* rw"}, u["DeviceAllow"])
	for _, k := range []string{"PrivateDevices", "ProtectProc", "ProcSubset", "PrivateUsers", "DynamicUser"} {
		assert.NotContains(t, u, k, "%s would hide what NVML or the attribution reads (see the unit's comments)", k)
	}
}
