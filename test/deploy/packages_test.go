package deploy

import (
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The .deb and .rpm (make packages, deploy/packages). The TestPackage*
// tests read the packages in -packages (make release-check passes the
// release folder) and skip without it. TestPackageDebInstall installs the
// .deb into a Debian root with dpkg, checks its unit with systemd-analyze,
// and runs the installed collector chrooted there, as its unit says, on the
// simulated NVML: it needs root (chroot, mount), dpkg and systemd.
var (
	packagesDir  = flag.String("packages", "", "the folder holding the .deb and .rpm (make packages: _build/packages; make release-check: the release)")
	scenarioPath = flag.String("scenario", "", "the simulated NVML's scenario for TestPackageDebInstall (default: testdata/scenarios/demo.json)")
)

// The package's files, mode and whether it is a config file kept on
// upgrade.
type packageFile struct {
	mode   os.FileMode
	config bool
}

var packageFiles = map[string]packageFile{
	"/usr/bin/otelcol-nvml":                        {0o755, false},
	"/usr/bin/otelcol-nvml-report":                 {0o755, false},
	"/usr/lib/systemd/system/otelcol-nvml.service": {0o644, false},
	"/etc/otelcol-nvml/config.yaml":                {0o644, true},
	"/etc/otelcol-nvml/otelcol-nvml.conf":          {0o600, true}, // systemd reads it as root; it may hold a token
}

// glibc is the oldest glibc the packages declare (nfpm.yaml's depends).
const glibc = "2.34"

var debArch = map[string]string{"amd64": "amd64", "arm64": "arm64"}
var rpmArch = map[string]string{"amd64": "x86_64", "arm64": "aarch64"}
var elfMachines = map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}

// hostLibDir is where a Debian root of this machine's architecture keeps
// its libraries and the NVIDIA driver's packages put libnvidia-ml.so.1.
var hostLibDir = map[string]string{"amd64": "/usr/lib/x86_64-linux-gnu", "arm64": "/usr/lib/aarch64-linux-gnu"}[runtime.GOARCH]

func debFile(v, arch string) string { return "otelcol-nvml_" + v + "-1_" + debArch[arch] + ".deb" }
func rpmFile(v, arch string) string { return "otelcol-nvml-" + v + "-1." + rpmArch[arch] + ".rpm" }

func packagesFolder(t *testing.T) string {
	t.Helper()
	if *packagesDir == "" {
		t.Skip("-packages not given (make package-test, make release-check)")
	}
	dir, err := filepath.Abs(*packagesDir)
	require.NoError(t, err)
	return dir
}

func output(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	require.NoError(t, err, "%s %s:\n%s", name, strings.Join(args, " "), out)
	return string(out)
}

// newestGLIBC is the newest GLIBC_x.y symbol version that bin imports.
func newestGLIBC(t *testing.T, bin string) string {
	t.Helper()
	f, err := elf.Open(bin)
	require.NoError(t, err)
	defer f.Close()
	syms, err := f.ImportedSymbols()
	require.NoError(t, err)
	newest := "0"
	for _, s := range syms {
		if v, ok := strings.CutPrefix(s.Version, "GLIBC_"); ok && versionLess(newest, v) {
			newest = v
		}
	}
	return newest
}

func versionLess(a, b string) bool {
	as, bs := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < max(len(as), len(bs)); i++ {
		var x, y int
		if i < len(as) {
			x, _ = strconv.Atoi(as[i])
		}
		if i < len(bs) {
			y, _ = strconv.Atoi(bs[i])
		}
		if x != y {
			return x < y
		}
	}
	return false
}

func sha256Bytes(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// TestPackageDeb reads each .deb with dpkg-deb: its control fields, its
// files and their modes, its conffiles, its maintainer scripts, and the
// binary's platform and glibc.
func TestPackageDeb(t *testing.T) {
	dir := packagesFolder(t)
	v := projectVersion(t)
	for arch, machine := range elfMachines {
		t.Run(arch, func(t *testing.T) {
			deb := filepath.Join(dir, debFile(v, arch))
			fields := map[string]string{}
			for _, f := range []string{"Package", "Version", "Architecture", "Depends", "Maintainer", "Description"} {
				fields[f] = strings.TrimSpace(output(t, "dpkg-deb", "--field", deb, f))
			}
			assert.Equal(t, "otelcol-nvml", fields["Package"])
			assert.Equal(t, v+"-1", fields["Version"])
			assert.Equal(t, debArch[arch], fields["Architecture"])
			assert.Contains(t, fields["Depends"], "libc6 (>= "+glibc+")")
			assert.Contains(t, fields["Depends"], "passwd", "the preinst runs useradd")
			assert.NotEmpty(t, fields["Maintainer"])

			root := t.TempDir()
			output(t, "dpkg-deb", "--extract", deb, root)
			got := map[string]packageFile{}
			require.NoError(t, filepath.Walk(root, func(p string, info os.FileInfo, err error) error {
				if err != nil || info.IsDir() {
					return err
				}
				got[strings.TrimPrefix(p, root)] = packageFile{info.Mode(), false}
				return nil
			}))
			control := t.TempDir()
			output(t, "dpkg-deb", "--control", deb, control)
			conffiles, err := os.ReadFile(filepath.Join(control, "conffiles"))
			require.NoError(t, err, "the .deb has no conffiles")
			for _, c := range strings.Fields(string(conffiles)) {
				f, ok := got[c]
				assert.True(t, ok, "conffile %s is not in the package", c)
				f.config = true
				got[c] = f
			}
			assert.Equal(t, packageFiles, got, "the .deb's files, modes and conffiles")
			for script, src := range map[string]string{"preinst": "preinstall.sh", "postinst": "postinstall.sh", "prerm": "preremove.sh", "postrm": "postremove.sh"} {
				want, err := os.ReadFile(filepath.Join(repoRoot, "deploy", "packages", "scripts", src))
				require.NoError(t, err)
				have, err := os.ReadFile(filepath.Join(control, script))
				require.NoError(t, err, "the .deb's %s", script)
				assert.Equal(t, string(want), string(have), "the .deb's %s is deploy/packages/scripts/%s", script, src)
			}
			for f, src := range map[string]string{
				"/usr/lib/systemd/system/otelcol-nvml.service": "otelcol-nvml.service",
				"/etc/otelcol-nvml/config.yaml":                "config.yaml",
				"/etc/otelcol-nvml/otelcol-nvml.conf":          "otelcol-nvml.conf",
			} {
				want, err := os.ReadFile(filepath.Join(repoRoot, "deploy", "packages", src))
				require.NoError(t, err)
				have, err := os.ReadFile(filepath.Join(root, f))
				require.NoError(t, err)
				assert.Equal(t, string(want), string(have), "%s is deploy/packages/%s", f, src)
			}

			bin := filepath.Join(root, "usr/bin/otelcol-nvml")
			ef, err := elf.Open(bin)
			require.NoError(t, err)
			assert.Equal(t, machine, ef.Machine, "the binary's machine")
			ef.Close()
			newest := newestGLIBC(t, bin)
			assert.False(t, versionLess(glibc, newest), "the binary needs GLIBC_%s, newer than the packages' glibc >= %s", newest, glibc)
			// otelcol-nvml-report is pure Go: the package's architecture, no libc.
			report := filepath.Join(root, "usr/bin/otelcol-nvml-report")
			rf, err := elf.Open(report)
			require.NoError(t, err)
			assert.Equal(t, machine, rf.Machine, "otelcol-nvml-report's machine")
			libs, err := rf.ImportedLibraries()
			require.NoError(t, err)
			assert.Empty(t, libs, "otelcol-nvml-report links no library")
			rf.Close()
		})
	}
}

// TestPackageRPM reads each .rpm with rpm -qp: name, version, arch,
// requires, its files (rpm -qlp --dump: modes, owners, %config), its
// scriptlets, and that it holds the same binary as the .deb.
func TestPackageRPM(t *testing.T) {
	dir := packagesFolder(t)
	v := projectVersion(t)
	for arch := range elfMachines {
		t.Run(arch, func(t *testing.T) {
			rpm := filepath.Join(dir, rpmFile(v, arch))
			q := output(t, "rpm", "-qp", "--queryformat", "%{NAME} %{VERSION} %{RELEASE} %{ARCH} %{OS}", rpm)
			assert.Equal(t, "otelcol-nvml "+v+" 1 "+rpmArch[arch]+" linux", strings.TrimSpace(q))
			requires := output(t, "rpm", "-qp", "--requires", rpm)
			assert.Contains(t, requires, "glibc >= "+glibc)
			assert.Contains(t, requires, "shadow-utils", "the %pre runs useradd")

			// path size mtime digest mode owner group isconfig isdoc rdev symlink
			got := map[string]packageFile{}
			digests := map[string]string{}
			for _, line := range strings.Split(strings.TrimSpace(output(t, "rpm", "-qlp", "--dump", rpm)), "\n") {
				f := strings.Fields(line)
				require.Len(t, f, 11, "rpm --dump line %q", line)
				mode, err := strconv.ParseUint(f[4], 8, 32)
				require.NoError(t, err)
				assert.Equal(t, []string{"root", "root"}, f[5:7], "%s's owner", f[0])
				got[f[0]] = packageFile{os.FileMode(mode & 0o777), f[7] == "1"}
				digests[f[0]] = f[3]
			}
			assert.Equal(t, packageFiles, got, "the .rpm's files, modes and %config files")
			// %config(noreplace): rpm -qp --configfiles lists them; the flag is in the header.
			flags := output(t, "rpm", "-qp", "--queryformat", "[%{FILENAMES} %{FILEFLAGS:fflags}\n]", rpm)
			for f, pf := range packageFiles {
				if pf.config {
					assert.Regexp(t, `(?m)^`+regexp.QuoteMeta(f)+` \S*n`, flags, "%s is %%config(noreplace)", f)
				}
			}

			scripts := output(t, "rpm", "-qp", "--scripts", rpm)
			for _, s := range []string{"preinstall", "postinstall", "preuninstall", "postuninstall"} {
				assert.Contains(t, scripts, s+" scriptlet (using /bin/sh)", "the .rpm's %s", s)
			}
			for _, src := range []string{"preinstall.sh", "postinstall.sh", "preremove.sh", "postremove.sh"} {
				want, err := os.ReadFile(filepath.Join(repoRoot, "deploy", "packages", "scripts", src))
				require.NoError(t, err)
				assert.Contains(t, scripts, strings.TrimSpace(string(want)), "the .rpm carries deploy/packages/scripts/%s", src)
			}

			// The same binary as the .deb's.
			root := t.TempDir()
			output(t, "dpkg-deb", "--extract", filepath.Join(dir, debFile(v, arch)), root)
			bin, err := os.ReadFile(filepath.Join(root, "usr/bin/otelcol-nvml"))
			require.NoError(t, err)
			assert.Equal(t, sha256Bytes(bin), digests["/usr/bin/otelcol-nvml"], "the .rpm's binary is the .deb's")
		})
	}
}
