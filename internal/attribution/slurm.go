package attribution

import (
	"strconv"
	"strings"
)

// Slurm's step names that are not numbers: the batch script, the extern
// step (which holds the processes that pam_slurm_adopt adopts, as an SSH
// session into the job's node) and salloc's interactive step.
var slurmNamedSteps = map[string]bool{"batch": true, "extern": true, "interactive": true}

// parseSlurmPath returns the Slurm job id and step that one cgroup path
// names; ok is false for a path outside Slurm's tree, or one whose job id
// is not a job id. It never fails.
//
// Slurm's cgroup plugins put each step's tasks in
//
//	cgroup/v2: /system.slice/slurmstepd.scope/job_<id>/step_<step>/user/task_<n>
//	           (<node>_slurmstepd.scope with several slurmds on one host;
//	           the stepd itself in .../step_<step>/slurm)
//	cgroup/v1: /slurm/uid_<uid>/job_<id>/step_<step>[/task_<n>]
//	           (slurm_<node> with several slurmds)
//
// The job segment must follow the stepd's scope (v2), or a uid_<uid> that
// follows the slurm root (v1): a user's own unit or directory named job_1
// is no Slurm job. A step that is neither a number nor batch, extern or
// interactive is left out, and the job kept.
func parseSlurmPath(path string) (job, step string, ok bool) {
	// Read for every GPU process at every scrape: most paths are not
	// Slurm's, and are let go before any allocation.
	if !strings.Contains(path, "/job_") {
		return "", "", false
	}
	segs := strings.Split(path, "/")
	for i := 1; i < len(segs); i++ {
		if !isSlurmParent(segs[:i]) {
			continue
		}
		id, found := strings.CutPrefix(segs[i], "job_")
		if !found || !isSlurmJobID(id) {
			return "", "", false
		}
		if i+1 < len(segs) {
			if s, found := strings.CutPrefix(segs[i+1], "step_"); found && isSlurmStep(s) {
				step = s
			}
		}
		return id, step, true
	}
	return "", "", false
}

// isSlurmParent reports whether the segments above a job_<id> segment are
// Slurm's: its v2 scope, or its v1 root and a uid.
func isSlurmParent(above []string) bool {
	last := above[len(above)-1]
	const scope = "_slurmstepd.scope"
	if last == "slurmstepd.scope" || strings.HasSuffix(last, scope) && len(last) > len(scope) {
		return true
	}
	if len(above) < 2 {
		return false
	}
	uid, found := strings.CutPrefix(last, "uid_")
	if !found || !isDecimal(uid, 10) {
		return false
	}
	root := above[len(above)-2]
	return root == "slurm" || strings.HasPrefix(root, "slurm_") && len(root) > len("slurm_")
}

// isSlurmJobID reports whether s is a job id as Slurm writes it: a decimal
// uint32 with no leading zero.
func isSlurmJobID(s string) bool {
	if !isDecimal(s, 10) || s[0] == '0' {
		return false
	}
	_, err := strconv.ParseUint(s, 10, 32)
	return err == nil
}

// isSlurmStep reports whether s is a step's name: its number, or one of
// Slurm's named steps.
func isSlurmStep(s string) bool {
	if slurmNamedSteps[s] {
		return true
	}
	if !isDecimal(s, 10) || len(s) > 1 && s[0] == '0' {
		return false
	}
	_, err := strconv.ParseUint(s, 10, 32)
	return err == nil
}

// isDecimal reports whether s is 1 to max ASCII digits.
func isDecimal(s string, max int) bool {
	if s == "" || len(s) > max {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
