// Package procinfo reads what the receiver reports about a GPU process from
// /proc: its executable name, owner and, only when asked, its command line.
// The /proc root is configurable so that a DaemonSet can read the host's
// /proc mounted elsewhere.
package procinfo // import "github.com/otelcol-nvml/otelcol-nvml/internal/procinfo"

import (
	"fmt"
	"os/user"
	"strconv"
	"strings"
	"sync"

	"github.com/prometheus/procfs"
)

// Info is what /proc says about one process.
type Info struct {
	ExecutableName string // /proc/<pid>/comm
	Owner          string // user name, or the numeric uid where it has none
	CommandLine    string // empty unless asked for
}

// Reader reads processes under one /proc root and caches user names.
type Reader struct {
	fs procfs.FS

	mu    sync.Mutex
	users map[string]string
}

// New returns a Reader on the /proc mounted at procRoot.
func New(procRoot string) (*Reader, error) {
	fs, err := procfs.NewFS(procRoot)
	if err != nil {
		return nil, fmt.Errorf("proc root %q: %w", procRoot, err)
	}
	return &Reader{fs: fs, users: map[string]string{}}, nil
}

// Read returns the process's details. Command lines can hold secrets, so
// they are read only when withCommandLine is set.
func (r *Reader) Read(pid int, withCommandLine bool) (Info, error) {
	p, err := r.fs.Proc(pid)
	if err != nil {
		return Info{}, err
	}
	var info Info
	if info.ExecutableName, err = p.Comm(); err != nil {
		return Info{}, err
	}
	if st, err := p.NewStatus(); err == nil {
		info.Owner = r.userName(strconv.FormatUint(st.UIDs[0], 10))
	}
	if withCommandLine {
		if args, err := p.CmdLine(); err == nil {
			info.CommandLine = strings.Join(args, " ")
		}
	}
	return info, nil
}

// userName maps a uid to a name through the local user database; inside a
// container that database rarely knows the host's users, so the uid itself
// is the fallback.
func (r *Reader) userName(uid string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if name, ok := r.users[uid]; ok {
		return name
	}
	name := uid
	if u, err := user.LookupId(uid); err == nil && u.Username != "" {
		name = u.Username
	}
	r.users[uid] = name
	return name
}
