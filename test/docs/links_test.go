// Package docs checks the repository's Markdown: every link resolves, and
// what the README states about the receiver matches the receiver.
package docs

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"unicode"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// repoRoot is the repository's root, two levels above this package.
var repoRoot = filepath.Join("..", "..")

// checkedFiles lists the Markdown files whose links are checked, relative to
// root: README.md, docs/**/*.md, the receiver's README and every README.md
// under testdata/, test/ and deploy/.
func checkedFiles(t *testing.T, root string) []string {
	t.Helper()
	var files []string
	add := func(rel string) {
		if _, err := os.Stat(filepath.Join(root, rel)); err == nil {
			files = append(files, filepath.ToSlash(rel))
		}
	}
	add("README.md")
	add(filepath.Join("receiver", "nvmlreceiver", "README.md"))
	walk := func(dir string, match func(name string) bool) {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d os.DirEntry, err error) error {
			if err != nil {
				if os.IsNotExist(err) && path == filepath.Join(root, dir) {
					return filepath.SkipDir
				}
				return err
			}
			if d.IsDir() {
				return nil
			}
			if match(d.Name()) {
				rel, err := filepath.Rel(root, path)
				if err != nil {
					return err
				}
				files = append(files, filepath.ToSlash(rel))
			}
			return nil
		})
		require.NoError(t, err)
	}
	walk("docs", func(name string) bool { return strings.HasSuffix(name, ".md") })
	for _, dir := range []string{"testdata", "test", "deploy"} {
		walk(dir, func(name string) bool { return name == "README.md" })
	}
	sort.Strings(files)
	return files
}

// link is one link target found in a Markdown file.
type link struct {
	line   int
	target string
}

var (
	fence = regexp.MustCompile("^\\s{0,3}(```+|~~~+)")
	// inlineLink matches [text](target) and ![alt](target), with an
	// optional <...> around the target and an optional "title".
	inlineLink = regexp.MustCompile(`!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*(<[^>]*>|[^)\s]+)(?:\s+"[^"]*")?\s*\)`)
	autoLink   = regexp.MustCompile(`<((?:https?|mailto|ftp|file):[^>\s]+)>`)
	refDef     = regexp.MustCompile(`^\s{0,3}\[([^\]]+)\]:\s*(\S+)`)
	refUse     = regexp.MustCompile(`\[(?:[^\[\]]|\[[^\[\]]*\])+\]\[([^\]]+)\]`)
	heading    = regexp.MustCompile(`^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$`)
	htmlAnchor = regexp.MustCompile(`<a\s+[^>]*(?:name|id)\s*=\s*"([^"]+)"`)
	htmlTag    = regexp.MustCompile(`<[^>]+>`)
	lineAnchor = regexp.MustCompile(`^L\d+(-L\d+)?$`)
)

// parsed is what one Markdown file holds: its links, reference
// definitions and uses, and the anchors its headings make.
type parsed struct {
	links   []link
	refDefs map[string]bool
	refUses []link
	anchors map[string]bool
}

// parse reads Markdown text outside fenced code blocks and code spans.
func parse(text string) parsed {
	p := parsed{refDefs: map[string]bool{}, anchors: map[string]bool{}}
	slugs := map[string]int{}
	inFence, fenceMark := false, ""
	for i, raw := range strings.Split(text, "\n") {
		n := i + 1
		if m := fence.FindStringSubmatch(raw); m != nil {
			mark := m[1][:1]
			switch {
			case !inFence:
				inFence, fenceMark = true, mark
			case mark == fenceMark:
				inFence = false
			}
			continue
		}
		if inFence {
			continue
		}
		for _, m := range htmlAnchor.FindAllStringSubmatch(raw, -1) {
			p.anchors[m[1]] = true
		}
		if m := heading.FindStringSubmatch(raw); m != nil {
			s := slug(m[2])
			if k, seen := slugs[s]; seen {
				slugs[s] = k + 1
				s = fmt.Sprintf("%s-%d", s, k+1)
			} else {
				slugs[s] = 0
			}
			p.anchors[s] = true
		}
		line := stripCodeSpans(raw)
		if m := refDef.FindStringSubmatch(line); m != nil {
			p.refDefs[strings.ToLower(m[1])] = true
			p.links = append(p.links, link{n, m[2]})
			continue
		}
		for _, m := range inlineLink.FindAllStringSubmatch(line, -1) {
			p.links = append(p.links, link{n, strings.TrimSuffix(strings.TrimPrefix(m[1], "<"), ">")})
		}
		for _, m := range autoLink.FindAllStringSubmatch(line, -1) {
			p.links = append(p.links, link{n, m[1]})
		}
		for _, m := range refUse.FindAllStringSubmatch(line, -1) {
			p.refUses = append(p.refUses, link{n, strings.ToLower(m[1])})
		}
	}
	return p
}

// stripCodeSpans drops the code spans of a line: a run of backticks, up to
// the next run of as many.
func stripCodeSpans(line string) string {
	var b strings.Builder
	for i := 0; i < len(line); {
		if line[i] != '`' {
			b.WriteByte(line[i])
			i++
			continue
		}
		j := i
		for j < len(line) && line[j] == '`' {
			j++
		}
		run := line[i:j]
		end := -1
		for k := j; k < len(line); {
			if line[k] != '`' {
				k++
				continue
			}
			l := k
			for l < len(line) && line[l] == '`' {
				l++
			}
			if l-k == len(run) {
				end = l
				break
			}
			k = l
		}
		if end < 0 { // no closing run: literal backticks
			b.WriteString(run)
			i = j
			continue
		}
		i = end
	}
	return b.String()
}

// slug is the anchor GitHub gives a heading: the rendered text in lower
// case, with everything but letters, marks, digits, '_', '-' and spaces
// dropped, and spaces turned into '-'.
func slug(headingText string) string {
	s := inlineLink.ReplaceAllStringFunc(headingText, func(m string) string {
		if strings.HasPrefix(m, "!") {
			return ""
		}
		return m[1:strings.Index(m, "](")]
	})
	s = htmlTag.ReplaceAllString(s, "")
	s = strings.NewReplacer("`", "", "**", "", "__", "").Replace(s)
	s = strings.ToLower(strings.TrimSpace(s))
	var b strings.Builder
	for _, r := range s {
		switch {
		case unicode.IsLetter(r), unicode.IsMark(r), unicode.IsDigit(r), r == '_', r == '-':
			b.WriteRune(r)
		case r == ' ':
			b.WriteByte('-')
		case unicode.Is(unicode.Nd, r), unicode.Is(unicode.Nl, r), unicode.Is(unicode.No, r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// checkLinks returns one line per link of file (relative to root) that
// does not resolve.
func checkLinks(root, file string) ([]string, error) {
	data, err := os.ReadFile(filepath.Join(root, file))
	if err != nil {
		return nil, err
	}
	p := parse(string(data))
	var problems []string
	bad := func(l link, format string, args ...any) {
		problems = append(problems, fmt.Sprintf("%s:%d: %s: %s", file, l.line, l.target, fmt.Sprintf(format, args...)))
	}
	for _, u := range p.refUses {
		if !p.refDefs[u.target] {
			bad(u, "reference link with no definition")
		}
	}
	cache := map[string]parsed{}
	for _, l := range p.links {
		target := l.target
		if strings.ContainsAny(target, " \t") {
			bad(l, "space in a link target")
			continue
		}
		u, err := url.Parse(target)
		if err != nil {
			bad(l, "not a URL: %v", err)
			continue
		}
		switch u.Scheme {
		case "http", "https":
			if u.Host == "" || strings.HasPrefix(u.Host, ".") || strings.HasSuffix(u.Host, ".") {
				bad(l, "no host")
			}
			continue // not fetched
		case "mailto":
			if !strings.Contains(u.Opaque, "@") {
				bad(l, "no address")
			}
			continue
		case "":
		default:
			bad(l, "scheme %q: link a file of the repository or an http(s) page", u.Scheme)
			continue
		}
		if u.Host != "" || strings.HasPrefix(target, "/") || filepath.IsAbs(u.Path) {
			bad(l, "absolute path: links must be relative to the file")
			continue
		}
		rel := file
		if u.Path != "" {
			rel = filepath.ToSlash(filepath.Join(filepath.Dir(file), u.Path))
			if rel == ".." || strings.HasPrefix(rel, "../") {
				bad(l, "outside the repository")
				continue
			}
		}
		info, err := os.Stat(filepath.Join(root, rel))
		if err != nil {
			bad(l, "no such file %s", rel)
			continue
		}
		if u.Fragment == "" {
			continue
		}
		if info.IsDir() {
			bad(l, "an anchor on a directory")
			continue
		}
		if !strings.HasSuffix(rel, ".md") {
			if !lineAnchor.MatchString(u.Fragment) {
				bad(l, "anchor %q on a file that is not Markdown", u.Fragment)
			}
			continue
		}
		tp, ok := cache[rel]
		if !ok {
			if rel == file {
				tp = p
			} else {
				b, err := os.ReadFile(filepath.Join(root, rel))
				if err != nil {
					return nil, err
				}
				tp = parse(string(b))
			}
			cache[rel] = tp
		}
		if !tp.anchors[u.Fragment] {
			bad(l, "no heading in %s makes anchor #%s", rel, u.Fragment)
		}
	}
	return problems, nil
}

// TestLinks: every link in the README, docs/, the receiver's README and
// the READMEs under testdata/, test/ and deploy/ resolves: a relative file
// exists, an anchor is a heading of its target, no absolute path, and an
// http(s) link is well-formed (not fetched).
func TestLinks(t *testing.T) {
	files := checkedFiles(t, repoRoot)
	require.Contains(t, files, "README.md")
	require.Contains(t, files, "receiver/nvmlreceiver/README.md")
	var n int
	for _, f := range files {
		problems, err := checkLinks(repoRoot, f)
		require.NoError(t, err)
		for _, p := range problems {
			t.Error(p)
		}
		data, err := os.ReadFile(filepath.Join(repoRoot, f))
		require.NoError(t, err)
		n += len(parse(string(data)).links)
	}
	t.Logf("%d links in %d files", n, len(files))
	assert.Greater(t, n, 50, "the parser finds the links")
}

// TestLinkCheckerFindsBrokenLinks: the checker reports each kind of broken
// link, and passes good ones.
func TestLinkCheckerFindsBrokenLinks(t *testing.T) {
	root := t.TempDir()
	write := func(rel, text string) {
		path := filepath.Join(root, rel)
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte(text), 0o644))
	}
	write("docs/other.md", "# Other page\n\n## The `nvml` receiver — why?\n\n## Twice\n\n## Twice\n")
	write("code.go", "package x\n")
	write("README.md", strings.Join([]string{
		"# Top",
		"[ok](docs/other.md) [ok](docs/other.md#other-page) [ok](docs/other.md#the-nvml-receiver--why)",
		"[ok](docs/other.md#twice-1) [ok](#top) [ok](code.go#L1-L2) [ok](docs) [ok](<docs/other.md>)",
		"[ok](https://example.com/x#y) <http://127.0.0.1:8889/metrics> [ok][ref]",
		"[ref]: docs/other.md",
		"`[not a link](missing.md)`",
		"```",
		"[not a link](missing.md)",
		"```",
		"[missing file](docs/missing.md)",
		"[missing anchor](docs/other.md#nowhere)",
		"[missing own anchor](#nowhere)",
		"[absolute](/srv/repo/docs/other.md)",
		"[file scheme](file:///srv/x.md)",
		"[no host](https://)",
		"[outside](../elsewhere/README.md)",
		"[anchor on code](code.go#main)",
		"[undefined ref][nope]",
		"",
	}, "\n"))
	problems, err := checkLinks(root, "README.md")
	require.NoError(t, err)
	want := []string{
		"README.md:10: docs/missing.md: no such file",
		"README.md:11: docs/other.md#nowhere: no heading in docs/other.md makes anchor #nowhere",
		"README.md:12: #nowhere: no heading in README.md makes anchor #nowhere",
		"README.md:13: /srv/repo/docs/other.md: absolute path",
		"README.md:14: file:///srv/x.md: scheme \"file\"",
		"README.md:15: https://: no host",
		"README.md:16: ../elsewhere/README.md: outside the repository",
		"README.md:17: code.go#main: anchor \"main\" on a file that is not Markdown",
		"README.md:18: nope: reference link with no definition",
	}
	require.Len(t, problems, len(want), "%s", strings.Join(problems, "\n"))
	sort.Strings(problems)
	sort.Strings(want)
	for i := range want {
		assert.True(t, strings.HasPrefix(problems[i], want[i]), "got %q, want %q...", problems[i], want[i])
	}
}

func TestSlug(t *testing.T) {
	for in, want := range map[string]string{
		"Quick start":                                            "quick-start",
		"2026-11-30 — foundation (issue 2)":                      "2026-11-30--foundation-issue-2",
		"The `nvml` receiver's config":                           "the-nvml-receivers-config",
		"Attribution: processes, containers, pods, users":        "attribution-processes-containers-pods-users",
		"[Linked](x.md) **bold**":                                "linked-bold",
		"Why no `resource_detection`":                            "why-no-resource_detection",
		"The submitted build (910cb7b, with issue 16's changes)": "the-submitted-build-910cb7b-with-issue-16s-changes",
	} {
		assert.Equal(t, want, slug(in), in)
	}
}
