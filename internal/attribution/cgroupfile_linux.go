package attribution

import (
	"io"

	cgroups "github.com/containerd/cgroups/v3"
)

// parseCgroupFile splits a /proc/<pid>/cgroup file into its cgroup v1 paths
// by controller and its cgroup v2 (unified) path.
func parseCgroupFile(r io.Reader) (v1 map[string]string, unified string, err error) {
	return cgroups.ParseCgroupFromReaderUnified(r)
}
