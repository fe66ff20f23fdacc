package deploy

import (
	"archive/tar"
	"crypto/sha256"
	"debug/buildinfo"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"flag"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

var (
	releaseDir     = flag.String("release", "", "the folder make release-artifacts wrote (_build/release); the TestRelease* tests skip without it")
	releaseVersion = flag.String("version", "", "the project's version (builder-config.yaml dist.version), with -release")
)

// projectVersion is builder-config.yaml dist.version, the one place the
// version is set.
func projectVersion(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, "builder-config.yaml"))
	require.NoError(t, err)
	var cfg struct {
		Dist struct {
			Version string `json:"version"`
		} `json:"dist"`
	}
	require.NoError(t, yaml.Unmarshal(data, &cfg))
	require.Regexp(t, `^[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$`, cfg.Dist.Version, "builder-config.yaml dist.version")
	return cfg.Dist.Version
}

// TestVersionInOnePlace: the chart's version and appVersion (the default
// image tag) are the project's version, and nothing else pins a tag.
func TestVersionInOnePlace(t *testing.T) {
	v := projectVersion(t)
	data, err := os.ReadFile(filepath.Join(chartDir, "Chart.yaml"))
	require.NoError(t, err)
	var chart struct {
		Version    string `json:"version"`
		AppVersion string `json:"appVersion"`
	}
	require.NoError(t, yaml.Unmarshal(data, &chart))
	assert.Equal(t, v, chart.Version, "Chart.yaml version must be builder-config.yaml dist.version")
	assert.Equal(t, v, chart.AppVersion, "Chart.yaml appVersion must be builder-config.yaml dist.version")

	data, err = os.ReadFile(filepath.Join(chartDir, "values.yaml"))
	require.NoError(t, err)
	var values struct {
		Image struct {
			Tag string `json:"tag"`
		} `json:"image"`
	}
	require.NoError(t, yaml.Unmarshal(data, &values))
	assert.Empty(t, values.Image.Tag, "values.yaml image.tag: empty, so the tag is appVersion")

	// The quick starts install the published chart at this version.
	install := regexp.MustCompile(`helm install \S+ oci://\S+/charts/otelcol-nvml --version (\S+)`)
	for _, f := range []string{filepath.Join(repoRoot, "README.md"), filepath.Join(chartDir, "README.md")} {
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		ms := install.FindAllSubmatch(data, -1)
		require.NotEmpty(t, ms, "%s: no helm install oci://.../charts/otelcol-nvml --version", f)
		for _, m := range ms {
			assert.Equal(t, v, string(m[1]), "%s: helm install --version", f)
		}
	}
}

func sha256File(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	h := sha256.New()
	_, err = io.Copy(h, f)
	require.NoError(t, err)
	return hex.EncodeToString(h.Sum(nil))
}

// ociArchive reads an OCI archive's files by name (blobs/sha256/<hex>, index.json).
func ociArchive(t *testing.T, path string) map[string][]byte {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	files := map[string][]byte{}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		require.NoError(t, err, path)
		if h.Typeflag != tar.TypeReg {
			continue
		}
		name := strings.TrimPrefix(h.Name, "./")
		if strings.HasPrefix(name, "blobs/") && h.Size > 1<<20 {
			files[name] = nil // a layer: only its presence matters here
			continue
		}
		b, err := io.ReadAll(tr)
		require.NoError(t, err)
		files[name] = b
	}
	return files
}

type ociDescriptor struct {
	MediaType string `json:"mediaType"`
	Digest    string `json:"digest"`
	Platform  *struct {
		OS           string `json:"os"`
		Architecture string `json:"architecture"`
	} `json:"platform"`
}

type ociIndex struct {
	MediaType string          `json:"mediaType"`
	Manifests []ociDescriptor `json:"manifests"`
	Config    *ociDescriptor  `json:"config"`
}

func blob(t *testing.T, files map[string][]byte, digest string) []byte {
	t.Helper()
	b, ok := files["blobs/"+strings.Replace(digest, ":", "/", 1)]
	require.True(t, ok, "blob %s missing", digest)
	return b
}

// imagePlatforms follows an OCI archive's index.json down to its images
// and returns each image's os/architecture from its config.
func imagePlatforms(t *testing.T, path string) []string {
	t.Helper()
	files := ociArchive(t, path)
	var top ociIndex
	require.NoError(t, json.Unmarshal(files["index.json"], &top), "%s: index.json", path)
	var platforms []string
	var walk func(ds []ociDescriptor)
	walk = func(ds []ociDescriptor) {
		for _, d := range ds {
			var m ociIndex
			require.NoError(t, json.Unmarshal(blob(t, files, d.Digest), &m))
			if m.Config == nil { // an image index
				walk(m.Manifests)
				continue
			}
			var cfg struct {
				OS           string `json:"os"`
				Architecture string `json:"architecture"`
			}
			require.NoError(t, json.Unmarshal(blob(t, files, m.Config.Digest), &cfg))
			platforms = append(platforms, cfg.OS+"/"+cfg.Architecture)
			if d.Platform != nil {
				assert.Equal(t, cfg.OS+"/"+cfg.Architecture, d.Platform.OS+"/"+d.Platform.Architecture, "%s: the index's platform of %s", path, d.Digest)
			}
		}
	}
	walk(top.Manifests)
	sort.Strings(platforms)
	return platforms
}

// TestReleaseArtifacts checks what make release-artifacts wrote, the files
// the release workflow attaches and pushes.
func TestReleaseArtifacts(t *testing.T) {
	if *releaseDir == "" {
		t.Skip("-release not given (make release-check)")
	}
	v := projectVersion(t)
	require.Equal(t, v, *releaseVersion, "the Makefile's VERSION is builder-config.yaml dist.version")
	dir, err := filepath.Abs(*releaseDir)
	require.NoError(t, err)
	arches := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}

	want := []string{"SHA256SUMS", "otelcol-nvml-" + v + ".oci.tar", "otelcol-nvml-" + v + ".tgz"}
	for a := range arches {
		want = append(want, "otelcol-nvml_"+v+"_linux_"+a, "otelcol-nvml_"+v+"_linux_"+a+".cdx.json", "otelcol-nvml-"+v+"-linux-"+a+".oci.tar",
			debFile(v, a), rpmFile(v, a)) // the packages: TestPackage*
	}
	sort.Strings(want)
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
	}
	require.Equal(t, want, got, "the release's files")

	t.Run("SHA256SUMS", func(t *testing.T) {
		data, err := os.ReadFile(filepath.Join(dir, "SHA256SUMS"))
		require.NoError(t, err)
		sums := map[string]string{}
		for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
			m := regexp.MustCompile(`^([0-9a-f]{64})  (\S+)$`).FindStringSubmatch(line)
			require.NotNil(t, m, "SHA256SUMS line %q (sha256sum's format)", line)
			sums[m[2]] = m[1]
		}
		for _, f := range want {
			if f == "SHA256SUMS" {
				continue
			}
			assert.Equal(t, sha256File(t, filepath.Join(dir, f)), sums[f], "SHA256SUMS for %s", f)
		}
		assert.Len(t, sums, len(want)-1)
	})

	for a, machine := range arches {
		t.Run("binary "+a, func(t *testing.T) {
			bin := filepath.Join(dir, "otelcol-nvml_"+v+"_linux_"+a)
			f, err := elf.Open(bin)
			require.NoError(t, err)
			assert.Equal(t, machine, f.Machine, "%s's machine", bin)
			interp := f.Section(".interp")
			require.NotNil(t, interp, "cgo: dynamically linked against glibc")
			f.Close()
			bi, err := buildinfo.ReadFile(bin)
			require.NoError(t, err)
			settings := map[string]string{}
			for _, s := range bi.Settings {
				settings[s.Key] = s.Value
			}
			assert.Equal(t, "1", settings["CGO_ENABLED"], "go-nvml needs cgo")
			assert.Equal(t, a, settings["GOARCH"])
			assert.Equal(t, "true", settings["-trimpath"])
			assert.NotContains(t, settings, "-race", "release binaries are not race builds")
			assert.True(t, slices.ContainsFunc(bi.Deps, func(m *debug.Module) bool { return m.Path == "github.com/NVIDIA/go-nvml" }), "go-nvml linked in")
		})
		t.Run("SBOM "+a, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join(dir, "otelcol-nvml_"+v+"_linux_"+a+".cdx.json"))
			require.NoError(t, err)
			var bom struct {
				BOMFormat   string `json:"bomFormat"`
				SpecVersion string `json:"specVersion"`
				Metadata    struct {
					Component struct {
						Name    string `json:"name"`
						Version string `json:"version"`
					} `json:"component"`
				} `json:"metadata"`
				Components []struct {
					Name    string `json:"name"`
					Version string `json:"version"`
					PURL    string `json:"purl"`
				} `json:"components"`
			}
			require.NoError(t, json.Unmarshal(data, &bom))
			assert.Equal(t, "CycloneDX", bom.BOMFormat)
			assert.NotEmpty(t, bom.SpecVersion)
			assert.Equal(t, "github.com/otelcol-nvml/otelcol-nvml/cmd/otelcol-nvml", bom.Metadata.Component.Name)
			assert.Equal(t, "v"+v, bom.Metadata.Component.Version)
			var names []string
			for _, c := range bom.Components {
				names = append(names, c.Name)
			}
			assert.Contains(t, names, "github.com/NVIDIA/go-nvml")
			assert.Contains(t, names, "go.opentelemetry.io/collector/otelcol")
			assert.Greater(t, len(names), 100, "every module of the binary")
		})
		t.Run("image "+a, func(t *testing.T) {
			assert.Equal(t, []string{"linux/" + a}, imagePlatforms(t, filepath.Join(dir, "otelcol-nvml-"+v+"-linux-"+a+".oci.tar")))
		})
	}

	t.Run("image index", func(t *testing.T) {
		assert.Equal(t, []string{"linux/amd64", "linux/arm64"}, imagePlatforms(t, filepath.Join(dir, "otelcol-nvml-"+v+".oci.tar")),
			"one index over both platforms")
	})

	t.Run("chart package", func(t *testing.T) {
		pkg := filepath.Join(dir, "otelcol-nvml-"+v+".tgz")
		out, ok := helmResult(t, "show", "chart", pkg)
		require.True(t, ok, out)
		var chart struct {
			Name       string `json:"name"`
			Version    string `json:"version"`
			AppVersion string `json:"appVersion"`
		}
		require.NoError(t, yaml.Unmarshal([]byte(out), &chart))
		assert.Equal(t, "otelcol-nvml", chart.Name)
		assert.Equal(t, v, chart.Version)
		assert.Equal(t, v, chart.AppVersion)
		out, ok = helmResult(t, "show", "values", pkg)
		require.True(t, ok, out)
		assert.Contains(t, out, "collectionInterval:")
		// The schema travels with the package.
		out, ok = helmResult(t, "template", "otelcol-nvml", pkg, "--set", "prometheus.enable=true")
		assert.False(t, ok, "the packaged chart takes an unknown key:\n%.300s", out)
		out, ok = helmResult(t, "template", "otelcol-nvml", pkg)
		require.True(t, ok, out)
		assert.Regexp(t, `image: "[^"]*otelcol-nvml:`+regexp.QuoteMeta(v)+`"`, out, "the default image tag is the version")
	})
}
