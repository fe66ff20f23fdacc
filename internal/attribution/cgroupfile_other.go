//go:build !linux

package attribution

import (
	"bufio"
	"fmt"
	"io"
	"strings"
)

// parseCgroupFile splits a /proc/<pid>/cgroup file into its cgroup v1 paths
// by controller and its cgroup v2 (unified) path. containerd/cgroups, which
// does this on Linux, builds on Linux only; elsewhere there are no cgroups
// to read, but the parsers and their tests still build and run.
func parseCgroupFile(r io.Reader) (v1 map[string]string, unified string, err error) {
	v1 = map[string]string{}
	s := bufio.NewScanner(r)
	for s.Scan() {
		parts := strings.SplitN(s.Text(), ":", 3)
		if len(parts) < 3 {
			return nil, unified, fmt.Errorf("invalid cgroup entry: %q", s.Text())
		}
		for _, controller := range strings.Split(parts[1], ",") {
			if controller == "" {
				unified = parts[2]
			} else {
				v1[controller] = parts[2]
			}
		}
	}
	if err := s.Err(); err != nil {
		return nil, unified, err
	}
	return v1, unified, nil
}
