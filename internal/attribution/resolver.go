package attribution

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"go.uber.org/zap"

	"github.com/otelcol-nvml/otelcol-nvml/internal/logonce"
)

// errPIDNamespace is returned by resolver.resolve for every PID once the
// proc root has been found to show only the collector's own PID namespace:
// NVML's PIDs cannot be resolved there (they name other processes, or
// none), and processes are reported by PID alone.
var errPIDNamespace = errors.New("the proc root shows only the collector's own PID namespace; run with hostPID, or mount the host's /proc and point the proc root at it")

// initialPIDNamespace is the inode number of the kernel's initial (host)
// PID namespace, PROC_PID_INIT_INO; fixed since Linux 3.8.
const initialPIDNamespace = "pid:[4026531836]"

// resolver maps GPU process IDs to their owners through the /proc mounted at
// its proc root, and checks once that NVML's PIDs can be found there. It is
// safe for concurrent use.
type resolver struct {
	procRoot string
	logger   *zap.Logger

	once   sync.Once
	err    error        // the verdict: nil, errPIDNamespace or an unreadable root
	warned *logonce.Log // the verdict was logged
}

// newResolver returns a resolver on the /proc mounted at procRoot ("/proc"
// with hostPID; the host's /proc mounted elsewhere, e.g. "/host/proc",
// without). A nil logger logs nothing. Nothing is read before the first
// resolve or check.
func newResolver(procRoot string, logger *zap.Logger) *resolver {
	if logger == nil {
		logger = zap.NewNop()
	}
	return &resolver{procRoot: procRoot, logger: logger, warned: logonce.New(1)}
}

// check reports, once for the resolver's life, whether the proc root can
// resolve NVML's PIDs:
//
//   - the proc root cannot be read: an error that wraps the os error;
//   - it shows only the collector's own PID namespace, and that is not the
//     host's: errPIDNamespace. That is a collector in a container without
//     hostPID and without the host's /proc mounted. NVML reports host PIDs
//     (or, on newer drivers, hides processes outside the caller's
//     namespace), so none of them can be attributed;
//   - otherwise nil: the root is an ancestor namespace's /proc (the host's,
//     mounted into the container; its self/status lists more than one
//     NSpid), or the host's own, or a tree that is not a procfs (tests).
//
// The first call that finds a problem logs it once, as a warning.
func (r *resolver) check() error {
	r.once.Do(func() { r.err = r.verdict() })
	if r.err != nil && r.warned.Once("verdict") {
		if errors.Is(r.err, errPIDNamespace) {
			r.logger.Warn("GPU processes cannot be mapped to containers: the collector runs in its own PID namespace. "+
				"Run it with hostPID: true, or mount the host's /proc and set the proc root to it; "+
				"GPU processes are reported by PID alone, without executable, owner and container attributes",
				zap.String("proc_root", r.procRoot))
		} else {
			r.logger.Warn("GPU processes cannot be mapped to containers: the proc root cannot be read; "+
				"GPU metrics go on without container attributes",
				zap.String("proc_root", r.procRoot), zap.Error(r.err))
		}
	}
	return r.err
}

// verdict is check's answer, found once.
func (r *resolver) verdict() error {
	fi, err := os.Stat(r.procRoot)
	if err != nil {
		return fmt.Errorf("proc root: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("proc root %q is not a directory", r.procRoot)
	}
	return pidNamespaceVerdict(r.procRoot)
}

// pidNamespaceVerdict returns errPIDNamespace when procRoot shows the
// caller's own PID namespace and that namespace is not the initial one.
// Whatever it cannot read counts as no problem: the PIDs then tell.
func pidNamespaceVerdict(procRoot string) error {
	nspids, err := selfNSpid(filepath.Join(procRoot, "self", "status"))
	if err != nil || len(nspids) != 1 {
		// No self (not a procfs), no NSpid line (Linux < 4.1), or several:
		// the proc root is an ancestor namespace's, which sees every
		// process below it.
		return nil
	}
	link, err := os.Readlink(filepath.Join(procRoot, "self", "ns", "pid"))
	if err != nil || link == initialPIDNamespace {
		return nil
	}
	return errPIDNamespace
}

// selfNSpid returns the NSpid line of a status file: the process's PID in
// each PID namespace from the proc root's down to its own.
func selfNSpid(statusPath string) ([]string, error) {
	f, err := os.Open(statusPath)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return parseNSpid(f)
}

// parseNSpid returns the fields of the NSpid line of a status file.
func parseNSpid(r io.Reader) ([]string, error) {
	s := bufio.NewScanner(r)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(s.Text(), "NSpid:"); ok {
			return strings.Fields(rest), nil
		}
	}
	if err := s.Err(); err != nil {
		return nil, err
	}
	return nil, errors.New("no NSpid line")
}

// resolve returns the owner of the process pid (a host PID, as NVML
// reports it). Errors:
//
//   - check's error (errPIDNamespace, or an unreadable root), for every
//     PID: the caller carries on without container attributes;
//   - ErrProcessNotFound: the process exited between NVML's list and this
//     read (normal: the process is left out of the GPU's owner);
//   - any other: the cgroup file could not be read or parsed.
//
// A host process gets a zero Owner and no error. resolve reads one small
// file per call and caches nothing, since PIDs are reused.
func (r *resolver) resolve(pid int) (Owner, error) {
	o, _, err := r.resolveCgroup(pid)
	return o, err
}

// resolveCgroup is resolve with the cgroup paths it read.
func (r *resolver) resolveCgroup(pid int) (Owner, Cgroup, error) {
	if err := r.check(); err != nil {
		return Owner{}, Cgroup{}, err
	}
	return resolveProcessCgroup(r.procRoot, pid)
}
