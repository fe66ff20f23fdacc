package deploy

import (
	"bufio"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

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

// debianRoot is an empty Debian root for dpkg --root: the dpkg database
// and the account files useradd --prefix edits (what a debootstrap root
// has, without its packages).
func debianRoot(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	for _, d := range []string{"var/lib/dpkg/info", "var/lib/dpkg/updates", "var/lib/dpkg/triggers", "etc", "tmp"} {
		require.NoError(t, os.MkdirAll(filepath.Join(root, d), 0o755))
	}
	require.NoError(t, os.Chmod(filepath.Join(root, "tmp"), 0o1777))
	for f, content := range map[string]string{
		"var/lib/dpkg/status":    "",
		"var/lib/dpkg/available": "",
		"etc/passwd":             "root:x:0:0:root:/root:/bin/sh\n",
		"etc/group":              "root:x:0:\n",
		"etc/shadow":             "root:*:19000:0:99999:7:::\n",
		"etc/gshadow":            "root:*::\n",
	} {
		require.NoError(t, os.WriteFile(filepath.Join(root, f), []byte(content), 0o644))
	}
	return root
}

// dpkgInstall installs deb into root the way mmdebstrap does for a foreign
// root: the maintainer scripts run on this host with DPKG_ROOT=root. The
// root has no libc6 or passwd package, hence --force-depends.
func dpkgInstall(t *testing.T, root, deb string) string {
	t.Helper()
	return output(t, "dpkg", "--root="+root, "--force-script-chrootless", "--force-depends", "--install", deb)
}

// passwdEntry is the user's line of root's /etc/passwd, split.
func passwdEntry(t *testing.T, root, user string) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, "etc/passwd"))
	require.NoError(t, err)
	var found []string
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Split(line, ":"); f[0] == user {
			require.Nil(t, found, "%s is in /etc/passwd twice", user)
			found = f
		}
	}
	require.NotNil(t, found, "no user %s in the root's /etc/passwd:\n%s", user, data)
	require.Len(t, found, 7)
	return found
}

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

// hostUnits copies this host's systemd targets into root, as the systemd
// package would have installed them there: the unit's default dependencies
// (sysinit.target, ...) and its WantedBy= for systemd-analyze --root.
func hostUnits(t *testing.T, root string) {
	t.Helper()
	targets, err := filepath.Glob("/usr/lib/systemd/system/*.target")
	require.NoError(t, err)
	require.NotEmpty(t, targets, "no systemd targets on this host: apt-get install systemd")
	for _, f := range targets {
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(root, f), data, 0o644))
	}
}

// chrootLibraries puts into root what the binary and the driver's library
// load: the loader and every library they need, found by soname in this
// host's library directories (where a Debian root has them).
func chrootLibraries(t *testing.T, root string, elfs ...string) {
	t.Helper()
	libdir := hostLibDir
	require.NoError(t, os.MkdirAll(filepath.Join(root, libdir), 0o755))
	var todo []string
	for _, e := range elfs {
		f, err := elf.Open(e)
		require.NoError(t, err)
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP {
				b, err := io.ReadAll(p.Open())
				require.NoError(t, err)
				loader := strings.TrimRight(string(b), "\x00")
				require.NoError(t, os.MkdirAll(filepath.Join(root, filepath.Dir(loader)), 0o755))
				copyTo(t, loader, filepath.Join(root, loader), 0o755)
			}
		}
		libs, err := f.ImportedLibraries()
		require.NoError(t, err)
		todo = append(todo, libs...)
		f.Close()
	}
	done := map[string]bool{}
	for len(todo) > 0 {
		lib := todo[0]
		todo = todo[1:]
		if done[lib] {
			continue
		}
		done[lib] = true
		dst := filepath.Join(root, libdir, lib)
		if _, err := os.Stat(dst); err == nil {
			continue // the driver's, already there
		}
		src := filepath.Join(libdir, lib)
		copyTo(t, src, dst, 0o644)
		f, err := elf.Open(src)
		require.NoError(t, err)
		libs, err := f.ImportedLibraries()
		require.NoError(t, err)
		todo = append(todo, libs...)
		f.Close()
	}
}

func copyTo(t *testing.T, from, to string, mode os.FileMode) {
	t.Helper()
	data, err := os.ReadFile(from)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(to, data, mode))
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// listeners are the addresses pid listens on (TCP, from /proc/net/tcp and
// tcp6, by the inodes of its sockets).
func listeners(t *testing.T, pid int) []string {
	t.Helper()
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	require.NoError(t, err)
	inodes := map[string]bool{}
	for _, fd := range fds {
		if l, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name())); err == nil {
			if m := regexp.MustCompile(`^socket:\[(\d+)\]$`).FindStringSubmatch(l); m != nil {
				inodes[m[1]] = true
			}
		}
	}
	var out []string
	for _, table := range []string{"tcp", "tcp6"} {
		f, err := os.Open(fmt.Sprintf("/proc/%d/net/%s", pid, table))
		require.NoError(t, err)
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			// sl local rem st tx:rx tr:when retrnsmt uid timeout inode
			if len(fields) < 10 || fields[3] != "0A" || !inodes[fields[9]] {
				continue
			}
			addr, port, _ := strings.Cut(fields[1], ":")
			b, err := hex.DecodeString(addr)
			require.NoError(t, err)
			for i := 0; i+4 <= len(b); i += 4 { // each 32-bit word is in host (little-endian) order
				b[i], b[i+1], b[i+2], b[i+3] = b[i+3], b[i+2], b[i+1], b[i]
			}
			p, _ := strconv.ParseUint(port, 16, 16)
			out = append(out, net.JoinHostPort(net.IP(b).String(), strconv.FormatUint(p, 10)))
		}
		f.Close()
	}
	return out
}

// TestPackageDebInstall installs the .deb of this machine's architecture
// into a Debian root with dpkg, checks the user, the unit (systemd-analyze verify and security),
// runs the installed collector there as the unit does, on the simulated
// NVML, and upgrades and removes the package, keeping the config.
func TestPackageDebInstall(t *testing.T) {
	dir := packagesFolder(t)
	v := projectVersion(t)
	if os.Geteuid() != 0 {
		t.Skip("needs root (chroot, mount)")
	}
	require.NotEmpty(t, hostLibDir, "no package for %s", runtime.GOARCH)
	deb := filepath.Join(dir, debFile(v, runtime.GOARCH))
	root := debianRoot(t)
	dpkgInstall(t, root, deb)
	status := output(t, "dpkg", "--root="+root, "--status", "otelcol-nvml")
	assert.Contains(t, status, "Status: install ok installed")
	assert.Contains(t, status, "Version: "+v+"-1")

	// The preinst made the unit's user: a system account without a login.
	pw := passwdEntry(t, root, "otelcol-nvml")
	uid, err := strconv.Atoi(pw[2])
	require.NoError(t, err)
	gid, err := strconv.Atoi(pw[3])
	require.NoError(t, err)
	assert.True(t, uid > 0 && uid < 1000, "a system uid, got %d", uid)
	assert.Equal(t, "/usr/sbin/nologin", pw[6])
	group, err := os.ReadFile(filepath.Join(root, "etc/group"))
	require.NoError(t, err)
	assert.Regexp(t, `(?m)^otelcol-nvml:x:`+pw[3]+`:$`, string(group), "its own group")

	unitPath := "/usr/lib/systemd/system/otelcol-nvml.service"
	t.Run("systemd-analyze", func(t *testing.T) {
		hostUnits(t, root)
		// verify: the unit parses, with every key known (a warning fails
		// too), and its ExecStart binary is installed.
		cmd := exec.Command("systemd-analyze", "verify", "--man=no", "--root="+root, unitPath)
		out, err := cmd.CombinedOutput()
		assert.NoError(t, err, "systemd-analyze verify:\n%s", out)
		assert.Empty(t, strings.TrimSpace(string(out)), "systemd-analyze verify says something")
		// security: the exposure of the hardening, 0 (all) to 10 (none); the
		// threshold is in tenths. 1.9 with what NVML allows.
		out, err = exec.Command("systemd-analyze", "security", "--offline=yes", "--root="+root, "--threshold=20", "otelcol-nvml.service").CombinedOutput()
		assert.NoError(t, err, "systemd-analyze security: exposure above 2.0:\n%s", out)
		assert.Regexp(t, `Overall exposure level for otelcol-nvml.service: \d`, string(out))
	})

	t.Run("runs on the simulated NVML", func(t *testing.T) {
		fake := binFlag(t, "fakenvml", *fakeNVMLPath)
		scenario := *scenarioPath
		if scenario == "" {
			scenario = filepath.Join(repoRoot, "testdata", "scenarios", "demo.json")
		}
		// The driver's library where the NVIDIA driver's Debian packages put it.
		require.NoError(t, os.MkdirAll(filepath.Join(root, hostLibDir), 0o755))
		copyTo(t, fake, filepath.Join(root, hostLibDir, "libnvidia-ml.so.1"), 0o644)
		copyTo(t, scenario, filepath.Join(root, "tmp/scenario.json"), 0o644)
		chrootLibraries(t, root, filepath.Join(root, "usr/bin/otelcol-nvml"), fake)
		proc := filepath.Join(root, "proc")
		require.NoError(t, os.MkdirAll(proc, 0o555))
		require.NoError(t, syscall.Mount("proc", proc, "proc", syscall.MS_NOSUID|syscall.MS_NODEV|syscall.MS_NOEXEC, ""))
		t.Cleanup(func() { _ = syscall.Unmount(proc, syscall.MNT_DETACH) })

		// The admin's settings, in the unit's environment file.
		promPort, healthPort, telemetryPort := freePort(t), freePort(t), freePort(t)
		conf := filepath.Join(root, "etc/otelcol-nvml/otelcol-nvml.conf")
		f, err := os.OpenFile(conf, os.O_APPEND|os.O_WRONLY, 0)
		require.NoError(t, err)
		_, err = fmt.Fprintf(f, "PROMETHEUS_PORT=%d\nHEALTH_PORT=%d\nTELEMETRY_PORT=%d\nCOLLECTION_INTERVAL=1s\nFAKE_NVML_SCENARIO=/tmp/scenario.json\n",
			promPort, healthPort, telemetryPort)
		require.NoError(t, err)
		require.NoError(t, f.Close())

		u := readUnit(t, filepath.Join(root, unitPath))
		assert.Equal(t, "otelcol-nvml", u.one(t, "User"))
		env := u.environment(t, root)
		argv := u.execStart(t, env)
		assert.Equal(t, []string{"/usr/bin/otelcol-nvml", "--config=/etc/otelcol-nvml/config.yaml"}, argv)
		var environ []string
		for k, v := range env {
			environ = append(environ, k+"="+v)
		}
		slices.Sort(environ)
		cmd := exec.Command("chroot", append([]string{fmt.Sprintf("--userspec=%d:%d", uid, gid), root}, argv...)...)
		cmd.Env = environ
		cmd.Dir = "/"
		logs := &syncBuffer{}
		cmd.Stdout, cmd.Stderr = logs, logs
		require.NoError(t, cmd.Start())
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		t.Cleanup(func() {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				_ = cmd.Process.Kill()
				<-done
			}
			if t.Failed() {
				t.Logf("---- collector output ----\n%s", logs.String())
			}
		})

		client := &http.Client{Timeout: 2 * time.Second}
		var metrics string
		deadline := time.Now().Add(60 * time.Second)
		for {
			select {
			case err := <-done:
				t.Fatalf("the collector exited: %v", err)
			default:
			}
			if resp, err := client.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", promPort)); err == nil {
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				metrics = string(b)
				if strings.Contains(metrics, "hw_gpu_memory_limit_bytes{") && strings.Contains(metrics, "system_cpu_time_seconds_total{") {
					break
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("no GPU and host metrics on :%d/metrics after 60 s; got:\n%.2000s", promPort, metrics)
			}
			time.Sleep(300 * time.Millisecond)
		}
		assert.Regexp(t, `hw_gpu_memory_limit_bytes\{[^}]*hw_id="GPU-`, metrics)
		assert.Contains(t, logs.String(), "fakenvml: SIMULATED NVML", "the loader found the driver's library in the root")
		resp, err := client.Get(fmt.Sprintf("http://127.0.0.1:%d/status", healthPort))
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusOK, resp.StatusCode, "the health check")
		resp, err = client.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", telemetryPort))
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusOK, resp.StatusCode, "the collector's own metrics")

		pid := cmd.Process.Pid
		procStatus, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		require.NoError(t, err)
		assert.Regexp(t, fmt.Sprintf(`(?m)^Uid:\s+%d\s+%d\s+%d\s+%d$`, uid, uid, uid, uid), string(procStatus), "runs as the package's user")
		// Loopback only, by default.
		ls := listeners(t, pid)
		assert.ElementsMatch(t, []string{
			fmt.Sprintf("127.0.0.1:%d", promPort), fmt.Sprintf("127.0.0.1:%d", healthPort), fmt.Sprintf("127.0.0.1:%d", telemetryPort),
		}, ls, "the collector's listeners")
	})

	t.Run("upgrade keeps the config; remove keeps it too", func(t *testing.T) {
		cfg := filepath.Join(root, "etc/otelcol-nvml/config.yaml")
		edited := []byte("# the admin's config\n")
		require.NoError(t, os.WriteFile(cfg, edited, 0o644))
		out := dpkgInstall(t, root, deb) // the same version again: dpkg's upgrade path
		assert.NotContains(t, out, "Configuration file", "dpkg asked about a conffile:\n%s", out)
		data, err := os.ReadFile(cfg)
		require.NoError(t, err)
		assert.Equal(t, edited, data, "the admin's config after an upgrade")
		passwdEntry(t, root, "otelcol-nvml") // once, with the same uid
		assert.Equal(t, pw, passwdEntry(t, root, "otelcol-nvml"))

		output(t, "dpkg", "--root="+root, "--force-script-chrootless", "--remove", "otelcol-nvml")
		_, err = os.Stat(filepath.Join(root, "usr/bin/otelcol-nvml"))
		assert.ErrorIs(t, err, os.ErrNotExist, "the binary after dpkg --remove")
		data, err = os.ReadFile(cfg)
		require.NoError(t, err, "dpkg --remove keeps conffiles")
		assert.Equal(t, edited, data)
	})
}
