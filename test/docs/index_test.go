package docs

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// Issue 33, part 6: docs/README.md listed reference/resources.md as
// "Resources and attribution", but it opened with "# Memory of the
// collector". Each reference page's title is what the index calls it.
func TestReferenceTitlesMatchTheIndex(t *testing.T) {
	index := readFile(t, filepath.Join("docs", "README.md"))
	start := strings.Index(index, "**Reference**")
	end := strings.Index(index, "**Operations**")
	if start < 0 || end < start {
		t.Fatal("docs/README.md has no Reference group before Operations")
	}
	links := regexp.MustCompile(`\[([^\]]+)\]\((reference/[^)#]+\.md)\)`).FindAllStringSubmatch(index[start:end], -1)
	if len(links) == 0 {
		t.Fatal("the Reference group links no page")
	}
	for _, l := range links {
		text, page := l[1], l[2]
		title := ""
		for _, line := range strings.Split(readFile(t, filepath.Join("docs", page)), "\n") {
			if strings.HasPrefix(line, "# ") {
				title = strings.TrimPrefix(line, "# ")
				break
			}
		}
		if !strings.Contains(strings.ToLower(title), strings.ToLower(text)) {
			t.Errorf("docs/%s: the index calls it %q, its title is %q", page, text, title)
		}
	}
}
