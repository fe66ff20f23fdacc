package procinfo

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// writePasswd writes the host's passwd where a proc root shows it, under
// its init's root.
func writePasswd(t *testing.T, procRoot, content string) {
	t.Helper()
	dir := filepath.Join(procRoot, "1", "root", "etc")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "passwd"), []byte(content), 0o644))
}

const hostPasswd = "root:x:0:0:root:/root:/bin/bash\n" +
	"# a comment\n" +
	"+nisuser::::::\n" +
	"alice:x:2001:2001:Alice,,,:/home/alice:/bin/bash\n" +
	"bob:x:2002:2002::/home/bob:/bin/zsh\r\n" +
	"bob2:x:2002:2002::/home/bob2:/bin/zsh\n" + // a second line for 2002: the first wins
	"broken:x:notanumber:1::/:/bin/false\n" +
	"padded:x:02003:1::/:/bin/false\n" +
	"short:x\n" +
	":x:2004:1::/:/bin/false\n"

func TestParsePasswd(t *testing.T) {
	got := parsePasswd(bytes.NewReader([]byte(hostPasswd)))
	assert.Equal(t, map[string]string{"0": "root", "2001": "alice", "2002": "bob"}, got)
	assert.Empty(t, parsePasswd(bytes.NewReader(nil)))
}

func TestUserNamesFromTheHostPasswd(t *testing.T) {
	root := t.TempDir()
	writePasswd(t, root, hostPasswd)
	u := newUsers(root)
	clock := time.Unix(1e9, 0)
	u.nss, u.now = false, func() time.Time { return clock }
	assert.Equal(t, "alice", u.name("2001"))
	assert.Equal(t, "bob", u.name("2002"))
	assert.Equal(t, "4000123", u.name("4000123"), "a uid with no name stays numeric")

	// A user added on the server: named at their first lookup once
	// passwdRecheck has passed, not before (a miss looks at the passwd at
	// most that often).
	writePasswd(t, root, hostPasswd+"carol:x:4000123:1::/home/carol:/bin/bash\n")
	future := time.Now().Add(time.Minute)
	require.NoError(t, os.Chtimes(filepath.Join(root, "1", "root", "etc", "passwd"), future, future))
	clock = clock.Add(passwdRecheck / 2)
	assert.Equal(t, "4000123", u.name("4000123"), "looked at less than passwdRecheck ago")
	clock = clock.Add(passwdRecheck / 2)
	assert.Equal(t, "carol", u.name("4000123"))
	assert.Equal(t, "alice", u.name("2001"))
}

func TestUserNamesFromNSSOnlyOnTheHost(t *testing.T) {
	root := t.TempDir()
	asked := 0
	fake := func(uid string) (string, bool) {
		asked++
		if uid == "2001" {
			return "alice-ldap", true
		}
		return "", false
	}
	u := newUsers(root)
	u.nss, u.lookupNSS = true, fake
	assert.Equal(t, "alice-ldap", u.name("2001"), "no passwd through the proc root: NSS, on the host")
	assert.Equal(t, "7", u.name("7"))
	assert.Equal(t, "7", u.name("7"))
	assert.Equal(t, 2, asked, "NSS's answers, misses too, are kept")

	u = newUsers(root)
	u.nss, u.lookupNSS = false, fake
	assert.Equal(t, "2001", u.name("2001"), "in a container, its NSS is not the host's")

	writePasswd(t, root, hostPasswd)
	u = newUsers(root)
	u.nss, u.lookupNSS = true, fake
	assert.Equal(t, "alice", u.name("2001"), "the host's passwd first")
}

func TestSharesHostMounts(t *testing.T) {
	self, err := os.Readlink("/proc/self/ns/mnt")
	if err != nil {
		t.Skip("no /proc/self/ns/mnt here")
	}
	root := t.TempDir()
	assert.False(t, sharesHostMounts(root), "nothing to compare, and not the collector's /proc")
	require.NoError(t, os.MkdirAll(filepath.Join(root, "1", "ns"), 0o755))
	require.NoError(t, os.Symlink("mnt:[1]", filepath.Join(root, "1", "ns", "mnt")))
	assert.Equal(t, self == "mnt:[1]", sharesHostMounts(root))
	other := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(other, "1", "ns"), 0o755))
	require.NoError(t, os.Symlink(self, filepath.Join(other, "1", "ns", "mnt")))
	assert.True(t, sharesHostMounts(other), "the same mount namespace as init's")
}

// FuzzParsePasswd: any bytes as a passwd file.
func FuzzParsePasswd(f *testing.F) {
	f.Add([]byte(hostPasswd))
	f.Add([]byte("a:b:c:d\n::::\n\x00:x:1:1\n"))
	if data, err := os.ReadFile("/etc/passwd"); err == nil {
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for uid, name := range parsePasswd(bytes.NewReader(data)) {
			n, err := strconv.ParseUint(uid, 10, 32)
			if err != nil || strconv.FormatUint(n, 10) != uid {
				t.Fatalf("uid %q", uid)
			}
			if name == "" || !validUserName(name) || !bytes.Contains(data, []byte(name+":")) {
				t.Fatalf("name %q", name)
			}
		}
	})
}
