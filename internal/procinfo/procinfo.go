// Package procinfo reads what the receiver reports about a GPU process from
// /proc: its executable name, owner, start time and, only when asked, its
// command line. The /proc root is configurable so that a DaemonSet can read
// the host's /proc mounted elsewhere.
package procinfo // import "github.com/otelcol-nvml/otelcol-nvml/internal/procinfo"

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/procfs"
)

// Info is what /proc says about one process.
type Info struct {
	// ExecutableName is the base name of /proc/<pid>/exe, or
	// /proc/<pid>/comm where the link cannot be read (another user's
	// process without CAP_SYS_PTRACE, a kernel thread). comm alone is no
	// good: it is cut to 15 characters and a process can rename it
	// (PyTorch workers call themselves pt_main_thread).
	ExecutableName string
	Owner          string // user name, or the numeric uid where it has none (users.go)
	// CreationTime is when the process started, ISO 8601 in UTC with the
	// kernel's 10 ms resolution; empty when unknown. A reused PID gets a new
	// one.
	CreationTime string
	CommandLine  string // empty unless asked for
	// Started is CreationTime as a time; zero when unknown.
	Started time.Time
	// UserCPU and SystemCPU are the process's CPU time so far (utime and
	// stime of /proc/<pid>/stat); valid when CPUOK.
	UserCPU, SystemCPU time.Duration
	CPUOK              bool
}

// creationTimeLayout is ISO 8601 to the hundredth of a second, the
// resolution of the start time in /proc/<pid>/stat (USER_HZ = 100).
const creationTimeLayout = "2006-01-02T15:04:05.00Z07:00"

// userHZ is the unit of the start time in /proc/<pid>/stat: Linux exports
// it as 100 on every architecture, whatever the kernel's own HZ.
const userHZ = 100

// Reader reads processes under one /proc root and caches user names.
type Reader struct {
	users *users
	fs    procfs.FS
	// bootTime is /proc/stat's btime, read once: the kernel derives it from
	// the wall clock, so a later read can move by a second, and the
	// creation time of a process must not.
	bootTime   time.Time
	bootTimeOK bool
}

// New returns a Reader on the /proc mounted at procRoot.
func New(procRoot string) (*Reader, error) {
	fs, err := procfs.NewFS(procRoot)
	if err != nil {
		return nil, fmt.Errorf("proc root %q: %w", procRoot, err)
	}
	r := &Reader{fs: fs, users: newUsers(procRoot)}
	if st, err := fs.Stat(); err == nil && st.BootTime > 0 {
		r.bootTime, r.bootTimeOK = time.Unix(int64(st.BootTime), 0).UTC(), true
	}
	return r, nil
}

// UserName returns the name the host gives uid (decimal), as for a
// process's owner; uid itself where none is known.
func (r *Reader) UserName(uid string) string { return r.users.name(uid) }

// Read returns the process's details. Command lines can hold secrets, so
// they are read only when withCommandLine is set.
func (r *Reader) Read(pid int, withCommandLine bool) (Info, error) {
	p, err := r.fs.Proc(pid)
	if err != nil {
		return Info{}, err
	}
	var info Info
	if info.ExecutableName, err = executableName(p); err != nil {
		return Info{}, err
	}
	if st, err := p.NewStatus(); err == nil {
		info.Owner = r.users.name(strconv.FormatUint(st.UIDs[0], 10))
	}
	if st, err := p.Stat(); err == nil {
		r.fromStat(&info, r.stat(st))
	}
	if withCommandLine {
		if args, err := p.CmdLine(); err == nil {
			info.CommandLine = strings.Join(args, " ")
		}
	}
	return info, nil
}

// Stat is what /proc/<pid>/stat says of a process: one file, read every
// scrape for the CPU, and what tells a process from a later one with the
// same PID (Start) or from itself before an exec (Comm: exec sets it).
type Stat struct {
	Comm  string
	Start uint64 // ticks since boot
	// UserCPU and SystemCPU: as Info's.
	UserCPU, SystemCPU time.Duration
	// Started: as Info's; zero without the boot time.
	Started time.Time
}

// ReadStat reads /proc/<pid>/stat alone.
func (r *Reader) ReadStat(pid int) (Stat, error) {
	p, err := r.fs.Proc(pid)
	if err != nil {
		return Stat{}, err
	}
	st, err := p.Stat()
	if err != nil {
		return Stat{}, err
	}
	return r.stat(st), nil
}

// ReadDetails is Read with the stat already read (ReadStat): it reads the
// executable, the owner and (when asked) the command line, and takes the
// CPU and start time from st.
func (r *Reader) ReadDetails(pid int, st Stat, withCommandLine bool) (Info, error) {
	p, err := r.fs.Proc(pid)
	if err != nil {
		return Info{}, err
	}
	var info Info
	if info.ExecutableName, err = executableName(p); err != nil {
		return Info{}, err
	}
	if ps, err := p.NewStatus(); err == nil {
		info.Owner = r.users.name(strconv.FormatUint(ps.UIDs[0], 10))
	}
	r.fromStat(&info, st)
	if withCommandLine {
		if args, err := p.CmdLine(); err == nil {
			info.CommandLine = strings.Join(args, " ")
		}
	}
	return info, nil
}

// CommandLine reads the process's command line alone; empty where it
// cannot be read.
func (r *Reader) CommandLine(pid int) string {
	p, err := r.fs.Proc(pid)
	if err != nil {
		return ""
	}
	args, err := p.CmdLine()
	if err != nil {
		return ""
	}
	return strings.Join(args, " ")
}

// WithCPU returns info, read by ReadDetails for the same process (same
// Start), with the CPU of a later st.
func WithCPU(info Info, st Stat) Info {
	info.UserCPU, info.SystemCPU, info.CPUOK = st.UserCPU, st.SystemCPU, true
	return info
}

func (r *Reader) stat(st procfs.ProcStat) Stat {
	// Ticks times the tick's length: multiplying by time.Second first
	// overflows int64 after ~2.9 years of uptime.
	s := Stat{
		Comm: st.Comm, Start: st.Starttime,
		UserCPU:   time.Duration(st.UTime) * (time.Second / userHZ),
		SystemCPU: time.Duration(st.STime) * (time.Second / userHZ),
	}
	if r.bootTimeOK {
		s.Started = r.started(st)
	}
	return s
}

// fromStat sets info's CPU and start time from st.
func (r *Reader) fromStat(info *Info, st Stat) {
	info.UserCPU, info.SystemCPU, info.CPUOK = st.UserCPU, st.SystemCPU, true
	info.Started, info.CreationTime = st.Started, ""
	if !st.Started.IsZero() {
		info.CreationTime = st.Started.Format(creationTimeLayout)
	}
}

// Started returns when the process started, reading /proc/<pid>/stat
// alone; zero without the boot time.
func (r *Reader) Started(pid int) (time.Time, error) {
	p, err := r.fs.Proc(pid)
	if err != nil {
		return time.Time{}, err
	}
	st, err := p.Stat()
	if err != nil || !r.bootTimeOK {
		return time.Time{}, err
	}
	return r.started(st), nil
}

// started is the start time of st's process as a time.
func (r *Reader) started(st procfs.ProcStat) time.Time {
	return r.bootTime.Add(time.Duration(st.Starttime) * (time.Second / userHZ))
}

// executableName is the base name of the executable, falling back to comm.
func executableName(p procfs.Proc) (string, error) {
	if exe, err := p.Executable(); err == nil && exe != "" {
		// A replaced or removed binary reads "/path/name (deleted)".
		return filepath.Base(strings.TrimSuffix(exe, " (deleted)")), nil
	}
	return p.Comm()
}
