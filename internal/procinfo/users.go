package procinfo

import (
	"bufio"
	"bytes"
	"io"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// maxPasswdFile caps what is read of the host's passwd: a shared server
// with tens of thousands of local accounts stays under a few MiB.
const maxPasswdFile = 16 << 20

// users maps a process's uid to its user's name, as the host knows it.
//
// Where the names come from, first that answers:
//
//  1. the host's passwd, <proc root>/1/root/etc/passwd: the root of the
//     host's init, seen through the proc root, which is the host's /proc
//     in a DaemonSet (and needs the read access to /proc/1/root that root,
//     or CAP_SYS_PTRACE, gives);
//  2. NSS (os/user: passwd, LDAP, SSSD...), only when the collector shares
//     the mount namespace of the proc root's init, that is, runs on the
//     host; when that cannot be told (/proc/1/ns unreadable, as for a
//     service user), when the proc root is the collector's own /proc. A
//     container's NSS knows the container's users, not the host's: a uid
//     there could take another user's name;
//  3. the uid itself, numeric.
//
// The passwd is read again when it changes, at a miss, checked at most
// once every passwdRecheck: a user added on a shared server gets a name at
// their first process a second after it, and the processes of users it
// does not name cost no stat each, every scrape.
type users struct {
	passwdPath string
	nss        bool

	mu sync.Mutex
	// names are the answers given, by uid.
	names map[string]string
	// passwd is the host's passwd, by uid; nil where it cannot be read.
	passwd        map[string]string
	passwdModTime time.Time
	passwdSize    int64
	// checkedAt is when the passwd was last looked at (its stat).
	checkedAt time.Time
	now       func() time.Time
	lookupNSS func(uid string) (string, bool)
}

// passwdRecheck is how often a miss may look at the host's passwd again.
const passwdRecheck = time.Second

func newUsers(procRoot string) *users {
	u := &users{
		passwdPath: filepath.Join(procRoot, "1", "root", "etc", "passwd"),
		names:      map[string]string{},
		now:        time.Now,
		lookupNSS:  lookupNSS,
	}
	u.nss = sharesHostMounts(procRoot)
	return u
}

// sharesHostMounts reports whether the collector's NSS is the host's: its
// mount namespace is the proc root's init's or, where that cannot be read,
// the proc root is its own /proc.
func sharesHostMounts(procRoot string) bool {
	self, errSelf := os.Readlink("/proc/self/ns/mnt")
	host, errHost := os.Readlink(filepath.Join(procRoot, "1", "ns", "mnt"))
	if errSelf == nil && errHost == nil {
		return self == host
	}
	return filepath.Clean(procRoot) == "/proc"
}

func lookupNSS(uid string) (string, bool) {
	u, err := user.LookupId(uid)
	if err != nil || u.Username == "" {
		return "", false
	}
	return u.Username, true
}

// name returns uid's user name, or uid where none is known.
func (u *users) name(uid string) string {
	u.mu.Lock()
	defer u.mu.Unlock()
	if name, ok := u.names[uid]; ok {
		return name
	}
	u.reloadPasswd()
	if name, ok := u.passwd[uid]; ok {
		u.names[uid] = name
		return name
	}
	if u.nss {
		// NSS may ask a directory over the network: its answer, a miss
		// too, is kept.
		name, ok := u.lookupNSS(uid)
		if !ok {
			name = uid
		}
		u.names[uid] = name
		return name
	}
	// Not kept: the passwd is checked again at the next lookup.
	return uid
}

// reloadPasswd reads the host's passwd again when it has changed, looking
// at most once every passwdRecheck; names given from the old one are
// forgotten.
func (u *users) reloadPasswd() {
	now := u.now()
	if !u.checkedAt.IsZero() && now.Sub(u.checkedAt) < passwdRecheck {
		return
	}
	u.checkedAt = now
	st, err := os.Stat(u.passwdPath)
	if err != nil {
		if u.passwd != nil {
			u.passwd, u.names = nil, map[string]string{}
		}
		return
	}
	if u.passwd != nil && st.ModTime().Equal(u.passwdModTime) && st.Size() == u.passwdSize {
		return
	}
	f, err := os.Open(u.passwdPath)
	if err != nil {
		return
	}
	defer f.Close()
	u.passwd = parsePasswd(io.LimitReader(f, maxPasswdFile))
	u.passwdModTime, u.passwdSize = st.ModTime(), st.Size()
	u.names = map[string]string{}
}

// parsePasswd reads passwd(5) lines, name:password:uid:gid:gecos:home:shell,
// into names by uid. As getpwuid, the first line of a uid wins. Comments,
// NIS compat lines (+, -), lines without a name or a numeric uid, and a
// last line cut short by the size cap are skipped. It never fails.
func parsePasswd(r io.Reader) map[string]string {
	out := map[string]string{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 64<<10)
	for sc.Scan() {
		line := bytes.TrimSuffix(sc.Bytes(), []byte("\r"))
		fields := strings.SplitN(string(line), ":", 4)
		if len(fields) < 4 {
			continue
		}
		name, uid := fields[0], fields[2]
		if name == "" || name[0] == '#' || name[0] == '+' || name[0] == '-' || !validUserName(name) {
			continue
		}
		// As /proc/<pid>/status writes it: decimal, no leading zero.
		if n, err := strconv.ParseUint(uid, 10, 32); err != nil || strconv.FormatUint(n, 10) != uid {
			continue
		}
		if _, seen := out[uid]; !seen {
			out[uid] = name
		}
	}
	return out
}

// validUserName rejects names that no useradd writes and that would make a
// poor label: control characters and spaces.
func validUserName(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] == 0x7f {
			return false
		}
	}
	return true
}
