//go:build cgo

package docs

import (
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient"
)

// The troubleshooting tables (README.md's, and docs/operations/robustness.md's
// in full) quote log lines; these tests hold them to what the code writes.
// A quote's "..." or "…" stands for any text; text after the quote may follow.

// troubleshootingTables are the files and sections whose first column
// quotes the log.
var troubleshootingTables = []struct{ file, section string }{
	{"README.md", "Troubleshooting"},
	{filepath.Join("docs", "operations", "robustness.md"), "Troubleshooting in detail"},
}

var firstCellQuote = regexp.MustCompile("(?m)^\\| `([^`]+)` \\|")

// tableQuotes returns the first column's quotes of a section's table.
func tableQuotes(t *testing.T, file, title string) []string {
	t.Helper()
	var out []string
	for _, m := range firstCellQuote.FindAllStringSubmatch(section(t, readFile(t, file), title), -1) {
		out = append(out, m[1])
	}
	require.NotEmpty(t, out, "%s: no table rows in %q", file, title)
	return out
}

// wildcards split a quote into the pieces that must appear in order.
var wildcards = regexp.MustCompile(`\.\.\.|…`)

// quoteMatches: the quote's pieces appear in msg in order, the first at its
// start unless the quote opens with a wildcard.
func quoteMatches(quote, msg string) bool {
	pieces := wildcards.Split(quote, -1)
	pos := 0
	for i, p := range pieces {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		j := strings.Index(msg[pos:], p)
		if j < 0 || (i == 0 && j != 0) {
			return false
		}
		pos += j + len(p)
	}
	return true
}

// unavailableMessages are the errors the receiver logs when NVML cannot be
// used ("NVML is unavailable; ..." with this error), made by the client
// itself: the system library missing and one that is not NVML (for real,
// through the loader), and nvmlInit's failures and an empty inventory (on
// go-nvml's mock).
func unavailableMessages(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	open := func(c *nvmlclient.Client) string {
		err := c.Open(nil)
		if err == nil {
			_ = c.Close(context.Background())
			return ""
		}
		var u *nvmlclient.UnavailableError
		require.ErrorAs(t, err, &u)
		return err.Error()
	}

	// The loader's search for libnvidia-ml.so.1, as with no library_path.
	msg := open(nvmlclient.NewSystem("", zap.NewNop()))
	if msg == "" {
		// A driver is installed here: the same failure from a directory
		// without it, shown as the loader's search would word it.
		dir := t.TempDir()
		msg = strings.ReplaceAll(open(nvmlclient.NewSystem(filepath.Join(dir, "libnvidia-ml.so.1"), zap.NewNop())), dir+"/", "")
	}
	out["library missing"] = msg
	out["not NVML"] = open(nvmlclient.NewSystem("libc.so.6", zap.NewNop()))

	for name, ret := range map[string]nvml.Return{
		"driver not loaded": nvml.ERROR_DRIVER_NOT_LOADED,
		"no permission":     nvml.ERROR_NO_PERMISSION,
	} {
		lib := &mock.Interface{InitFunc: func() nvml.Return { return ret }}
		out[name] = open(nvmlclient.New(lib, zap.NewNop()))
	}
	noGPU := &mock.Interface{
		InitFunc:                       func() nvml.Return { return nvml.SUCCESS },
		ShutdownFunc:                   func() nvml.Return { return nvml.SUCCESS },
		SystemGetDriverVersionFunc:     func() (string, nvml.Return) { return "580.00", nvml.SUCCESS },
		SystemGetNVMLVersionFunc:       func() (string, nvml.Return) { return "13.580", nvml.SUCCESS },
		SystemGetCudaDriverVersionFunc: func() (int, nvml.Return) { return 13000, nvml.SUCCESS },
		DeviceGetCountFunc:             func() (int, nvml.Return) { return 0, nvml.SUCCESS },
	}
	out["no GPU"] = open(nvmlclient.New(noGPU, zap.NewNop()))
	for name, m := range out {
		require.NotEmpty(t, m, "%s: Open did not fail", name)
		require.True(t, strings.HasPrefix(m, "NVML unavailable: "), "%s: %s", name, m)
	}
	return out
}

// codeMessages returns the string constants of the receiver's and the
// client's code (tests left out), a concatenation of literals folded into
// one; a piece that is not a literal (a duration's String()) cuts it.
func codeMessages(t *testing.T) []string {
	t.Helper()
	var out []string
	var fold func(e ast.Expr) []string
	fold = func(e ast.Expr) []string {
		switch e := e.(type) {
		case *ast.BasicLit:
			if e.Kind == token.STRING {
				if s, err := strconv.Unquote(e.Value); err == nil {
					return []string{s}
				}
			}
		case *ast.BinaryExpr:
			if e.Op == token.ADD {
				l, r := fold(e.X), fold(e.Y)
				if len(l) > 0 && len(r) > 0 {
					// literal + literal: one piece where they meet.
					joined := append(append([]string{}, l[:len(l)-1]...), l[len(l)-1]+r[0])
					return append(joined, r[1:]...)
				}
				return append(l, r...)
			}
		case *ast.ParenExpr:
			return fold(e.X)
		}
		return nil
	}
	fset := token.NewFileSet()
	for _, dir := range []string{filepath.Join("receiver", "nvmlreceiver"), "internal"} {
		err := filepath.WalkDir(filepath.Join(repoRoot, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			ast.Inspect(f, func(n ast.Node) bool {
				if e, ok := n.(ast.Expr); ok {
					if pieces := fold(e); len(pieces) > 0 {
						out = append(out, pieces...)
						return false
					}
				}
				return true
			})
			return nil
		})
		require.NoError(t, err)
	}
	require.NotEmpty(t, out)
	return out
}

// TestTroubleshootingTablesQuoteTheLog: every quote of the troubleshooting
// tables is a message the code writes (one that begins "NVML unavailable:"
// one the client gives for that cause when asked, not a literal that might
// never reach the log), and every cause of NVML being unavailable has a row.
func TestTroubleshootingTablesQuoteTheLog(t *testing.T) {
	unavailable := unavailableMessages(t)
	code := codeMessages(t)
	for _, table := range troubleshootingTables {
		quotes := tableQuotes(t, table.file, table.section)
		for _, q := range quotes {
			matched := false
			for _, m := range unavailable {
				matched = matched || quoteMatches(q, m)
			}
			if !strings.HasPrefix(q, "NVML unavailable:") {
				for _, m := range code {
					matched = matched || quoteMatches(q, m)
				}
			}
			assert.True(t, matched, "%s, %q: `%s` is not what the collector logs", table.file, table.section, q)
		}
		for cause, m := range unavailable {
			covered := false
			for _, q := range quotes {
				covered = covered || quoteMatches(q, m)
			}
			assert.True(t, covered, "%s, %q: no row for NVML unavailable, %s; the log says:\n%s", table.file, table.section, cause, m)
		}
	}
	for cause, m := range unavailable {
		t.Logf("%s: %s", cause, m)
	}
}

// TestQuoteMatches: the matching rule of the tables' quotes.
func TestQuoteMatches(t *testing.T) {
	for _, c := range []struct {
		quote, msg string
		want       bool
	}{
		{"NVML unavailable: cannot load libnvidia-ml.so.1: …", "NVML unavailable: cannot load libnvidia-ml.so.1: libnvidia-ml.so.1: cannot open shared object file (fix)", true},
		{"NVML unavailable: libnvidia-ml.so.1 could not be loaded", "NVML unavailable: cannot load libnvidia-ml.so.1: libnvidia-ml.so.1: cannot open shared object file (fix)", false},
		{"GPU is lost", "GPU is lost (fallen off the bus); no more metrics", true},
		{"is lost", "GPU is lost", false},
		{"... is not an NVML library: it lacks nvmlInit_v2, ...", "NVML unavailable: libc.so.6 is not an NVML library: it lacks nvmlInit_v2, nvmlShutdown (fix)", true},
		{"a ... c", "a b c", true},
		{"a ... c", "a c b", true},
		{"a ... c", "c a", false},
	} {
		assert.Equal(t, c.want, quoteMatches(c.quote, c.msg), "%q against %q", c.quote, c.msg)
	}
}
