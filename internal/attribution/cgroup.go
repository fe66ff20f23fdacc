package attribution

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// ErrProcessNotFound is returned when <procRoot>/<pid> does not exist: the
// process has exited, or it lives in a PID namespace the proc root does not
// show.
var ErrProcessNotFound = errors.New("process not found under the proc root")

// maxCgroupFile caps what is read of one /proc/<pid>/cgroup. Real files are
// well under 4 KiB; a cgroup v1 host with every controller and deep paths
// stays under 16 KiB.
const maxCgroupFile = 64 << 10

// resolveProcess reads <procRoot>/<pid>/cgroup and returns the process's
// container id and pod UID. A host process, outside any container, gets a
// zero Owner and no error. A process that is gone (or invisible from
// procRoot) gets an error that matches ErrProcessNotFound.
//
// resolveProcess does not check the PID namespace: resolver does.
func resolveProcess(procRoot string, pid int) (Owner, error) {
	o, _, err := resolveProcessCgroup(procRoot, pid)
	return o, err
}

// Cgroup is a process's cgroup paths as its /proc/<pid>/cgroup gave them:
// CgroupCPUReader.ReadCgroup reads its CPU by them, without reading the
// file again. The zero Cgroup is none.
type Cgroup struct {
	v1      map[string]string
	unified string
	ok      bool
}

// IsZero reports whether c holds no paths.
func (c Cgroup) IsZero() bool { return !c.ok }

// resolveProcessCgroup is resolveProcess with the paths it read.
func resolveProcessCgroup(procRoot string, pid int) (Owner, Cgroup, error) {
	if pid <= 0 {
		return Owner{}, Cgroup{}, fmt.Errorf("pid %d: %w", pid, ErrProcessNotFound)
	}
	f, err := os.Open(filepath.Join(procRoot, strconv.Itoa(pid), "cgroup"))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return Owner{}, Cgroup{}, fmt.Errorf("pid %d: %w: %w", pid, ErrProcessNotFound, err)
		}
		return Owner{}, Cgroup{}, fmt.Errorf("pid %d: %w", pid, err)
	}
	defer f.Close()
	v1, unified, err := parseCgroupFile(io.LimitReader(f, maxCgroupFile))
	if err != nil {
		return Owner{}, Cgroup{}, fmt.Errorf("pid %d: parse cgroup file: %w", pid, err)
	}
	return ownerOf(v1, unified), Cgroup{v1: v1, unified: unified, ok: true}, nil
}

// parseCgroup parses the contents of a /proc/<pid>/cgroup file, cgroup v1,
// v2 or hybrid, with containerd/cgroups' parser (on Linux), and returns the container
// id and pod UID found in its paths (see parseCgroupPath), and the Slurm
// job and step (see parseSlurmPath).
//
// The cgroup v2 path ("0::/...") is tried first, then the v1 controllers'
// paths in name order. The first path that names a container wins; failing
// that, the first that names a pod. An empty file gives a zero Owner; a line
// that is not "id:controllers:path" gives an error.
func parseCgroup(r io.Reader) (Owner, error) {
	v1, unified, err := parseCgroupFile(r)
	if err != nil {
		return Owner{}, fmt.Errorf("parse cgroup file: %w", err)
	}
	return ownerOf(v1, unified), nil
}

// ownerOf is parseCgroup's answer for a parsed cgroup file: its v1
// controllers' paths and its v2 path.
func ownerOf(v1 map[string]string, unified string) Owner {
	paths := make([]string, 0, len(v1)+1)
	if unified != "" {
		paths = append(paths, unified)
	}
	controllers := make([]string, 0, len(v1))
	for c := range v1 {
		controllers = append(controllers, c)
	}
	sort.Strings(controllers)
	for _, c := range controllers {
		paths = append(paths, v1[c])
	}
	var found Owner
	for _, p := range paths {
		o := parseCgroupPath(p)
		if o.ContainerID != "" {
			found = o
			break
		}
		if found.PodUID == "" {
			found = o
		}
	}
	// The Slurm job: the first path that names one (cgroup v1's freezer,
	// memory and devices controllers all do, and agree).
	for _, p := range paths {
		if job, step, ok := parseSlurmPath(p); ok {
			found.SlurmJobID, found.SlurmStep = job, step
			break
		}
	}
	return found
}

// parseCgroupPath returns the container id and pod UID that one cgroup path
// names; it never fails, and gives a zero Owner for a host path.
//
// The path is cut into segments at "/" (and at ":", for the
// "slice:prefix:id" form that a systemd cgroup driver mismatch leaves).
// The innermost segment that carries a 64-hex id is the container:
//
//	/docker/<id>                                  docker, cgroupfs driver
//	/system.slice/docker-<id>.scope               docker, systemd driver
//	.../cri-containerd-<id>.scope                 containerd CRI, systemd driver
//	/kubepods/besteffort/pod<uid>/<id>            containerd or docker, cgroupfs driver
//	.../crio-<id>.scope, .../crio-<id>            CRI-O
//	/machine.slice/libpod-<id>.scope/container    podman (also libpod_parent/libpod-<id>)
//	.../kubepods-pod<uid>.slice:cri-containerd:<id>
//
// Conmon's scopes (crio-conmon-<id>.scope, libpod-conmon-<id>.scope) name
// the runtime's monitor, not the container, and are skipped. The pod is the
// innermost segment at or above the container that is "pod<uid>"
// (cgroupfs) or "kubepods[-<qos>]-pod<uid>.slice" (systemd, with the UID's
// dashes written as underscores, turned back into dashes here). UIDs are
// 8-4-4-4-12 hex, or 32 hex for static pods.
//
// Segments are matched by shape, not by their place from the root, so paths
// seen through a cgroup namespace ("/../../kubepods-...") and nested setups
// (kind's kubelet.slice inside a node container, docker in docker) resolve
// to the innermost container.
func parseCgroupPath(path string) Owner {
	segs := strings.FieldsFunc(path, func(r rune) bool { return r == '/' || r == ':' })
	var o Owner
	ctr := -1
	for i := len(segs) - 1; i >= 0; i-- {
		if id, ok := containerIDOf(segs[i]); ok {
			o.ContainerID, ctr = id, i
			break
		}
	}
	from := len(segs) - 1
	if ctr >= 0 {
		from = ctr
	}
	for i := from; i >= 0; i-- {
		if uid, ok := podUIDOf(segs[i]); ok {
			o.PodUID = uid
			break
		}
	}
	return o
}

// containerIDOf returns the 64-hex id a cgroup segment names: the segment
// itself, or what follows its last '-' once ".scope" is cut.
func containerIDOf(seg string) (string, bool) {
	seg = strings.TrimSuffix(seg, ".scope")
	if strings.Contains(seg, "conmon") {
		return "", false
	}
	if i := strings.LastIndexByte(seg, '-'); i >= 0 {
		seg = seg[i+1:]
	}
	if len(seg) != 64 || !isLowerHex(seg) {
		return "", false
	}
	return seg, true
}

// podUIDOf returns the pod UID a cgroup segment names, with dashes.
func podUIDOf(seg string) (string, bool) {
	seg = strings.TrimSuffix(seg, ".slice")
	var raw string
	switch {
	case strings.HasPrefix(seg, "pod"):
		raw = seg[len("pod"):]
	case strings.Contains(seg, "kubepods"):
		i := strings.LastIndex(seg, "-pod")
		if i < 0 {
			return "", false
		}
		raw = seg[i+len("-pod"):]
	default:
		return "", false
	}
	return normalizeUID(raw)
}

// normalizeUID accepts a UID as 8-4-4-4-12 lowercase hex whose separators
// are all '-' or all '_', or as 32 lowercase hex (a static pod's hash), and
// returns it with dashes.
func normalizeUID(s string) (string, bool) {
	if len(s) == 32 {
		return s, isLowerHex(s)
	}
	if len(s) != 36 {
		return "", false
	}
	sep := s[8]
	if sep != '-' && sep != '_' {
		return "", false
	}
	b := []byte(s)
	for i, c := range b {
		switch i {
		case 8, 13, 18, 23:
			if c != sep {
				return "", false
			}
			b[i] = '-'
		default:
			if !isLowerHexByte(c) {
				return "", false
			}
		}
	}
	return string(b), true
}

func isLowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isLowerHexByte(s[i]) {
			return false
		}
	}
	return true
}

func isLowerHexByte(c byte) bool { return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' }
