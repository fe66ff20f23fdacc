package nvmlclient

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Issue 17, defect 7: the package's comments agree with its code. Every
// file a comment of this package or of its subpackages names exists (a bare
// name beside the comment, a path such as guard/use.go from this package),
// and the cost of the violation counters is stated once, in the read table
// (call/table.go, call/plain.go), where three comments once gave 0.45, 1.0 and
// 1.25 ms.
func TestCommentsAgree(t *testing.T) {
	files := treeFiles(t, false)
	named := regexp.MustCompile(`\b[a-z0-9_/]+\.go\b`)
	cost := regexp.MustCompile(`[0-9.]+ ms`)
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		require.NoError(t, err)
		block := "" // the comment paragraph so far
		for i, line := range strings.Split(string(src), "\n") {
			_, comment, ok := strings.Cut(line, "//")
			if !ok || strings.TrimSpace(comment) == "" {
				block = ""
				continue
			}
			block += " " + comment
			for _, name := range named.FindAllString(comment, -1) {
				if strings.Contains(comment, "receiver") || strings.Contains(comment, "scraper.go") {
					continue // another package's file
				}
				_, errHere := os.Stat(filepath.Join(filepath.Dir(f), name))
				_, errRoot := os.Stat(name)
				assert.True(t, errHere == nil || errRoot == nil, "%s:%d names %s", f, i+1, name)
			}
			if f != "call/table.go" && f != "call/plain.go" && strings.Contains(block, "violation") && cost.MatchString(block) {
				t.Errorf("%s:%d states a violation cost outside the read table: %s", f, i+1, strings.TrimSpace(block))
				block = ""
			}
		}
	}
}

// treeFiles lists the Go files of this package and of the packages under
// it, their tests only when tests is set.
func treeFiles(t *testing.T, tests bool) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || !tests && strings.HasSuffix(path, "_test.go") {
			return err
		}
		files = append(files, path)
		return nil
	})
	require.NoError(t, err)
	return files
}
