package attribution

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"go.uber.org/zap"

	"github.com/otelcol-nvml/otelcol-nvml/internal/logonce"
)

// The Slurm allocation of a node's GPUs, as Princeton's jobstats has sites
// write it: Slurm's prolog writes one file per allocated GPU into a
// directory (by default /run/gpustat), named by the GPU's index (0, 1, ...),
// its UUID (GPU-...) or, for a MIG device, the MIG device's UUID (MIG-...),
// holding "<jobid> <uid>"; the epilog removes it. A GPU so named is held by
// that job, with or without a process on it.
//
// Slurm itself keeps no per-node file a collector could read without its
// CLI: the job's GPUs are in SLURM_JOB_GPUS and CUDA_VISIBLE_DEVICES of the
// prolog's and the job's environment only, and cgroup/v2 constrains devices
// with an eBPF program, not a readable list. The prolog's file is the
// node-local record.

// maxGPUStatEntries bounds the entries read from the directory in one
// refresh: a node has at most a few dozen GPUs and MIG devices, and a
// directory filled by mistake must not make each scrape slow.
const maxGPUStatEntries = 1024

// maxGPUStatFile is the most read of one file: "<jobid> <uid>\n" is at most
// 22 bytes.
const maxGPUStatFile = 128

// SlurmAllocation is what one gpustat file says: the job and its user.
type SlurmAllocation struct {
	JobID string
	UID   uint32
}

// ParseGPUStat reads one gpustat file's content: a Slurm job id and a uid,
// decimal, separated by white space, with an optional trailing newline.
// Anything else, a job id Slurm would not write (0, a leading zero, above
// uint32) included, is not ok. It never fails otherwise.
func ParseGPUStat(b []byte) (SlurmAllocation, bool) {
	fields := bytes.Fields(b)
	if len(fields) != 2 {
		return SlurmAllocation{}, false
	}
	job, uid := string(fields[0]), string(fields[1])
	if !isSlurmJobID(job) || !isDecimal(uid, 10) || len(uid) > 1 && uid[0] == '0' {
		return SlurmAllocation{}, false
	}
	n, err := strconv.ParseUint(uid, 10, 32)
	if err != nil {
		return SlurmAllocation{}, false
	}
	return SlurmAllocation{JobID: job, UID: uint32(n)}, true
}

// isGPUStatName reports whether a file name in the directory can name a
// device: an index, a GPU's UUID or a MIG device's UUID. Other files (the
// prolog's temporary files, a README) are left alone.
func isGPUStatName(name string) bool {
	if isDecimal(name, 4) {
		return len(name) == 1 || name[0] != '0'
	}
	return strings.HasPrefix(name, "GPU-") || strings.HasPrefix(name, "MIG-")
}

// gpuStatDir reads the gpustat directory, once per Refresh, and answers
// which job holds a device from what it read. It is safe for concurrent
// use.
type gpuStatDir struct {
	dir    string
	logger *zap.Logger
	// userName is the login name of a uid (decimal), or the uid.
	userName func(uid string) string

	refreshing sync.Mutex // one refresh at a time
	warned     *logonce.Log

	mu     sync.Mutex
	byName map[string]Owner // file name -> its job and user
}

// newGPUStatDir returns a reader of dir; nothing is read before refresh.
// userName names a uid as the host does (procinfo's, as for
// process.owner); nil leaves the uid as it is.
func newGPUStatDir(dir string, userName func(uid string) string, logger *zap.Logger) *gpuStatDir {
	if userName == nil {
		userName = func(uid string) string { return uid }
	}
	return &gpuStatDir{dir: dir, logger: logger, userName: userName, warned: NewCauseLog(maxWarnedCauses)}
}

// refresh reads the directory again: one ReadDir and one small read per
// file. An absent directory is no allocation, silently (a node without
// Slurm, or a job-less node whose prolog makes it on first use); any other
// failure is logged once per cause and also reads as no allocation.
func (d *gpuStatDir) refresh() {
	d.refreshing.Lock()
	defer d.refreshing.Unlock()
	entries, err := os.ReadDir(d.dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		d.warn("Cannot read the Slurm GPU allocation directory; its GPUs read as not allocated until it can be read",
			"dir: "+ErrorCause(err), zap.String("dir", d.dir), zap.Error(err))
	}
	byName := make(map[string]Owner, len(entries))
	for i, e := range entries {
		if i == maxGPUStatEntries {
			d.warn("The Slurm GPU allocation directory holds too many files; the rest are not read",
				"too many", zap.String("dir", d.dir), zap.Int("read", maxGPUStatEntries))
			break
		}
		name := e.Name()
		if !e.Type().IsRegular() || !isGPUStatName(name) {
			// A directory, a symlink, or a FIFO (whose read would block
			// the scrape): the prolog writes plain files.
			continue
		}
		b, err := readGPUStat(filepath.Join(d.dir, name))
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) { // removed by an epilog meanwhile
				d.warn("Cannot read a Slurm GPU allocation file; that GPU reads as not allocated",
					"file: "+ErrorCause(err), zap.String("file", filepath.Join(d.dir, name)), zap.Error(err))
			}
			continue
		}
		alloc, ok := ParseGPUStat(b)
		if !ok {
			d.warn(`A Slurm GPU allocation file does not hold "<jobid> <uid>"; that GPU reads as not allocated`,
				"content", zap.String("file", filepath.Join(d.dir, name)), zap.ByteString("content", b))
			continue
		}
		byName[name] = Owner{SlurmJobID: alloc.JobID, UserName: d.userName(strconv.FormatUint(uint64(alloc.UID), 10))}
	}
	d.mu.Lock()
	d.byName = byName
	d.mu.Unlock()
}

// readGPUStat reads at most maxGPUStatFile bytes of a file.
func readGPUStat(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, maxGPUStatFile))
}

// owner is the job that the last refresh found holding the device: by its
// UUID (a GPU's or a MIG device's) first, then, for a whole GPU, by its
// index (index < 0: unknown).
func (d *gpuStatDir) owner(uuid string, index int) (Owner, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if o, ok := d.byName[uuid]; ok {
		return o, true
	}
	if index < 0 || !strings.HasPrefix(uuid, "GPU-") {
		return Owner{}, false
	}
	o, ok := d.byName[strconv.Itoa(index)]
	return o, ok
}

// warn logs msg once per cause; after maxWarnedCauses causes, at debug level.
func (d *gpuStatDir) warn(msg, cause string, fields ...zap.Field) {
	switch v := d.warned.Fail(cause, ""); {
	case v.Full:
		d.logger.Debug(msg, fields...)
	case v.Log:
		d.logger.Warn(msg+" (logged once per cause)", fields...)
	}
}
