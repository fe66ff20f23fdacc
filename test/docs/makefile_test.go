package docs

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMakeTargetsHaveHelp: every target of the Makefile a reader can name
// (every rule that is not a file) is .PHONY and has its "## target: what"
// line, and `make help` lists it.
func TestMakeTargetsHaveHelp(t *testing.T) {
	text := readFile(t, "Makefile")
	phony := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^\.PHONY:(.*)$`).FindAllStringSubmatch(text, -1) {
		for _, name := range strings.Fields(m[1]) {
			phony[name] = true
		}
	}
	require.NotEmpty(t, phony, "the Makefile's .PHONY line")
	documented := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^## ([a-z0-9-]+): \S`).FindAllStringSubmatch(text, -1) {
		documented[m[1]] = true
	}
	// A rule on a plain name (not a variable, not a file under _build or
	// .bin): a target.
	for _, m := range regexp.MustCompile(`(?m)^([a-z][a-z0-9-]*)( [a-z0-9 -]*)?:([^=]|$)`).FindAllStringSubmatch(text, -1) {
		assert.True(t, phony[m[1]], "target %s is not in .PHONY", m[1])
	}
	for name := range phony {
		assert.True(t, documented[name], "target %s has no \"## %s: ...\" line", name, name)
	}

	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make on this machine: make help not run")
	}
	cmd := exec.Command("make", "--no-print-directory", "-s", "help")
	cmd.Dir = repoRoot
	// Under make unit: not the parent make's flags and job server.
	cmd.Env = append(os.Environ(), "MAKEFLAGS=", "MFLAGS=", "MAKELEVEL=")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "make help: %s", out)
	listed := map[string]bool{}
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) > 1 && !strings.HasPrefix(line, " ") {
			listed[f[0]] = true
		}
	}
	for name := range phony {
		assert.True(t, listed[name], "make help does not list %s", name)
	}
}
