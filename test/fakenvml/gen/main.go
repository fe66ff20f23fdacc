// Command gen writes the simulated NVML's generic getters from go-nvml's
// nvml.h: every simple device getter,
//
//	nvmlReturn_t DECLDIR nvmlDeviceGetX(nvmlDevice_t device, T *out);
//	nvmlReturn_t DECLDIR nvmlDeviceGetX(nvmlDevice_t device, E sel, T *out);
//
// with T an integer type (unsigned int, unsigned long long, int, an enum or
// an integer typedef, or a versioned struct of one integer member besides its
// version) and E an enum typedef (a selector), answers one value per key from
// the simulated GPU's getter table, with no code of its own. A key is the
// function's name, or name(SELECTOR) for a selector getter, SELECTOR being
// the enum constant without the prefix that the enum's constants share
// (nvmlDeviceGetMaxClockInfo(SM) for NVML_CLOCK_SM).
//
// It writes:
//   - test/fakenvml/getters_gen.h and getters_gen.c: the C fake's functions,
//     each weak, so that a hand-written function of the same name wins at
//     link time, and the key table;
//   - test/nvmltest/selectors_gen.go: the getters and their selectors'
//     names by go-nvml Go enum type and value, for the Go mock.
//
// Run from the module root (make generate), or with -check to fail when the
// files differ from what it would write (make check-generated).
package main

import (
	"bytes"
	"flag"
	"fmt"
	"go/format"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

func main() {
	header := flag.String("header", "", "go-nvml's nvml.h (default: from go list -m github.com/NVIDIA/go-nvml)")
	cdir := flag.String("c", "test/fakenvml", "where getters_gen.h and getters_gen.c go")
	gofile := flag.String("go", "test/nvmltest/selectors_gen.go", "the Go mock's selector table")
	check := flag.Bool("check", false, "write nothing; fail when a file differs from what would be written")
	flag.Parse()
	if *header == "" {
		out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/NVIDIA/go-nvml").Output()
		if err != nil {
			fatal("go list -m github.com/NVIDIA/go-nvml: %v", err)
		}
		*header = filepath.Join(strings.TrimSpace(string(out)), "pkg", "nvml", "nvml.h")
	}
	src, err := os.ReadFile(*header)
	if err != nil {
		fatal("%v", err)
	}
	h := parse(string(src))
	gs := h.getters()
	files := map[string][]byte{
		filepath.Join(*cdir, "getters_gen.h"): writeH(gs),
		filepath.Join(*cdir, "getters_gen.c"): writeC(h, gs),
		*gofile:                               writeGo(h, gs),
	}
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	stale := false
	for _, n := range names {
		if *check {
			old, _ := os.ReadFile(n)
			if !bytes.Equal(old, files[n]) {
				fmt.Fprintf(os.Stderr, "%s is out of date with nvml.h: run 'make generate' and commit\n", n)
				stale = true
			}
			continue
		}
		if err := os.WriteFile(n, files[n], 0o644); err != nil {
			fatal("%v", err)
		}
	}
	if stale {
		os.Exit(1)
	}
}

func fatal(f string, a ...any) {
	fmt.Fprintf(os.Stderr, "gen: "+f+"\n", a...)
	os.Exit(1)
}

// ---- nvml.h ----

type constant struct {
	name  string
	value int64
}

type enum struct {
	name   string // the C typedef, nvmlClockType_t
	consts []constant
	// sel: the constants a selector takes, by value (the first name of a
	// value), without the enum's sentinel (…_COUNT); prefix: what their
	// names share, to the last underscore.
	sel    []constant
	prefix string
}

type field struct{ typ, name string }

type header struct {
	enums    map[string]*enum
	ints     map[string]string  // integer typedef -> base C type
	structs  map[string][]field // struct typedef (resolved through aliases) -> members
	protos   []proto
	macroed  map[string]bool // function names that a #define renames
	constVal map[string]int64
}

type proto struct {
	name   string
	params []string
}

var (
	lineComment  = regexp.MustCompile(`//[^\n]*`)
	blockComment = regexp.MustCompile(`(?s)/\*.*?\*/`)
	defineRe     = regexp.MustCompile(`^\s*#\s*define\s+(nvml\w+)\s+(nvml\w+)\s*$`)
	enumRe       = regexp.MustCompile(`(?s)typedef\s+enum\s*\w*\s*\{([^}]*)\}\s*(\w+)\s*;`)
	structRe     = regexp.MustCompile(`(?s)typedef\s+struct\s*\w*\s*\{([^{}]*)\}\s*(\w+)\s*;`)
	aliasRe      = regexp.MustCompile(`typedef\s+((?:unsigned\s+)?(?:long\s+long|long|int|char|short)|\w+)\s+(\w+)\s*;`)
	protoRe      = regexp.MustCompile(`nvmlReturn_t\s+DECLDIR\s+(nvmlDeviceGet\w+)\s*\(([^)]*)\)\s*;`)
	memberRe     = regexp.MustCompile(`^((?:unsigned\s+)?(?:long\s+long|long|int|short|char)|\w+)\s+(\w+)$`)
	paramRe      = regexp.MustCompile(`^((?:const\s+)?(?:unsigned\s+)?(?:long\s+long|long|int|short|char)|(?:const\s+)?\w+)\s*(\*?)\s*(\w+)$`)
)

var intTypes = map[string][2]float64{
	"unsigned int":       {0, 4294967295},
	"unsigned long long": {0, 9e18}, // llround's range
	"int":                {-2147483648, 2147483647},
	"long long":          {-9e18, 9e18},
}

func parse(src string) *header {
	h := &header{enums: map[string]*enum{}, ints: map[string]string{}, structs: map[string][]field{},
		macroed: map[string]bool{}, constVal: map[string]int64{}}
	// Preprocessor lines go; the declarations of NVML_NO_UNVERSIONED_FUNC_DEFS
	// (the old unversioned ABI) with them.
	var kept []string
	skip := 0
	cont := false // in a continued preprocessor line
	for _, l := range strings.Split(src, "\n") {
		t := strings.TrimSpace(l)
		if cont {
			cont = strings.HasSuffix(t, "\\")
			continue
		}
		switch {
		case skip > 0:
			if strings.HasPrefix(t, "#if") {
				skip++
			} else if strings.HasPrefix(t, "#endif") {
				skip--
			}
			continue
		case strings.HasPrefix(t, "#ifdef NVML_NO_UNVERSIONED_FUNC_DEFS"):
			skip = 1
			continue
		}
		if m := defineRe.FindStringSubmatch(l); m != nil {
			h.macroed[m[1]], h.macroed[m[2]] = true, true
		}
		if strings.HasPrefix(t, "#") {
			cont = strings.HasSuffix(t, "\\")
			continue
		}
		kept = append(kept, l)
	}
	text := strings.Join(kept, "\n")
	text = blockComment.ReplaceAllString(text, " ")
	text = lineComment.ReplaceAllString(text, "")
	text = regexp.MustCompile(`DEPRECATED\([^)]*\)`).ReplaceAllString(text, "")

	for _, m := range enumRe.FindAllStringSubmatch(text, -1) {
		if e := h.parseEnum(m[2], m[1]); e != nil {
			h.enums[e.name] = e
		}
	}
	for _, m := range structRe.FindAllStringSubmatch(text, -1) {
		var fs []field
		ok := true
		for _, d := range strings.Split(m[1], ";") {
			d = strings.Join(strings.Fields(d), " ")
			if d == "" {
				continue
			}
			mm := memberRe.FindStringSubmatch(d)
			if mm == nil {
				ok = false
				break
			}
			fs = append(fs, field{mm[1], mm[2]})
		}
		if ok {
			h.structs[m[2]] = fs
		}
	}
	for _, m := range aliasRe.FindAllStringSubmatch(text, -1) {
		base, name := strings.Join(strings.Fields(m[1]), " "), m[2]
		if _, ok := intTypes[base]; ok {
			h.ints[name] = base
		} else if fs, ok := h.structs[base]; ok {
			h.structs[name] = fs
		} else if e, ok := h.enums[base]; ok {
			h.enums[name] = e
		}
	}
	for _, m := range protoRe.FindAllStringSubmatch(text, -1) {
		var ps []string
		for _, p := range strings.Split(m[2], ",") {
			ps = append(ps, strings.Join(strings.Fields(p), " "))
		}
		h.protos = append(h.protos, proto{m[1], ps})
	}
	return h
}

// parseEnum reads an enum's constants: implicit, decimal or hex literals,
// earlier constants, and shifts of those; nil for anything else.
func (h *header) parseEnum(name, body string) *enum {
	e := &enum{name: name}
	next := int64(0)
	for _, item := range strings.Split(body, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		cname, expr, has := strings.Cut(item, "=")
		cname = strings.TrimSpace(cname)
		v := next
		if has {
			var ok bool
			if v, ok = h.eval(strings.TrimSpace(expr)); !ok {
				return nil
			}
		}
		e.consts = append(e.consts, constant{cname, v})
		h.constVal[cname] = v
		next = v + 1
	}
	if len(e.consts) == 0 {
		return nil
	}
	seen := map[int64]bool{}
	for _, c := range e.consts {
		if seen[c.value] || strings.HasSuffix(c.name, "_COUNT") {
			continue
		}
		seen[c.value] = true
		e.sel = append(e.sel, c)
	}
	if len(e.sel) < 2 {
		return e // no selector: too few names to share a prefix
	}
	p := e.sel[0].name
	for _, c := range e.sel[1:] {
		for !strings.HasPrefix(c.name, p) {
			p = p[:len(p)-1]
		}
	}
	e.prefix = p[:strings.LastIndex(p, "_")+1]
	return e
}

func (h *header) eval(x string) (int64, bool) {
	x = strings.TrimSpace(x)
	for strings.HasPrefix(x, "(") && strings.HasSuffix(x, ")") {
		x = strings.TrimSpace(x[1 : len(x)-1])
	}
	if a, b, ok := strings.Cut(x, "<<"); ok {
		l, ok1 := h.eval(a)
		r, ok2 := h.eval(b)
		return l << r, ok1 && ok2
	}
	if v, ok := h.constVal[x]; ok {
		return v, true
	}
	x = strings.TrimRight(x, "uUlL")
	v, err := strconv.ParseInt(x, 0, 64)
	if err != nil {
		if u, err := strconv.ParseUint(x, 0, 64); err == nil {
			return int64(u), true
		}
		if len(x) > 1 && x[0] == '-' {
			if v, err := strconv.ParseInt(x, 0, 64); err == nil {
				return v, true
			}
		}
		return 0, false
	}
	return v, true
}

// ---- the getters ----

type getter struct {
	name    string
	params  []string // C parameters as declared
	outType string   // the pointee: "unsigned int", an enum, a struct
	outName string
	member  string // the struct member set; "" when outType is an integer
	memType string // its type
	sel     *enum  // the selector's enum, or nil
	selName string
	min     float64
	max     float64
}

func (h *header) intRange(t string) ([2]float64, bool) {
	if r, ok := intTypes[t]; ok {
		return r, true
	}
	if b, ok := h.ints[t]; ok {
		return intTypes[b], true
	}
	if _, ok := h.enums[t]; ok {
		return intTypes["int"], true
	}
	return [2]float64{}, false
}

func (h *header) getters() []getter {
	var out []getter
	seen := map[string]bool{}
	for _, p := range h.protos {
		if h.macroed[p.name] || seen[p.name] || (len(p.params) != 2 && len(p.params) != 3) || p.params[0] != "nvmlDevice_t device" {
			continue
		}
		last := paramRe.FindStringSubmatch(p.params[len(p.params)-1])
		if last == nil || last[2] != "*" || strings.HasPrefix(last[1], "const") {
			continue
		}
		g := getter{name: p.name, params: p.params, outType: last[1], outName: last[3]}
		r, ok := h.intRange(g.outType)
		if !ok {
			// a versioned struct of one integer member besides its version
			fs, isStruct := h.structs[g.outType]
			if !isStruct || len(fs) != 2 || fs[0] != (field{"unsigned int", "version"}) {
				continue
			}
			if r, ok = h.intRange(fs[1].typ); !ok {
				continue
			}
			g.member, g.memType = fs[1].name, fs[1].typ
		}
		g.min, g.max = r[0], r[1]
		if len(p.params) == 3 {
			sel := paramRe.FindStringSubmatch(p.params[1])
			if sel == nil || sel[2] != "" {
				continue
			}
			e, ok := h.enums[sel[1]]
			if !ok || e.prefix == "" {
				continue
			}
			g.sel, g.selName = e, sel[3]
		}
		seen[p.name] = true
		out = append(out, g)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// keys are the getter's keys with their selector constants ("" for none).
func (g getter) keys() [][2]string {
	if g.sel == nil {
		return [][2]string{{g.name, ""}}
	}
	var ks [][2]string
	for _, c := range g.sel.sel {
		ks = append(ks, [2]string{g.name + "(" + strings.TrimPrefix(c.name, g.sel.prefix) + ")", c.name})
	}
	return ks
}

// ---- output ----

const banner = "Code generated by test/fakenvml/gen from go-nvml's nvml.h; DO NOT EDIT."

func writeH(gs []getter) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "/* %s */\n", banner)
	b.WriteString(`/*
 * The generic getters (getters_gen.c): FAKE_GEN_GETTERS(X) names each
 * function, for FAKE_CALLS; FAKE_GEN_KEYS counts their keys.
 */
#ifndef FAKENVML_GETTERS_GEN_H
#define FAKENVML_GETTERS_GEN_H

#define FAKE_GEN_GETTERS(X) \
`)
	n := 0
	for _, g := range gs {
		fmt.Fprintf(&b, "\tX(%s) \\\n", g.name)
		n += len(g.keys())
	}
	fmt.Fprintf(&b, "\t/* end */\n\n#define FAKE_GEN_KEYS %d\n\n#endif\n", n)
	return b.Bytes()
}

func cnum(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

func writeC(h *header, gs []getter) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "/* %s */\n", banner)
	b.WriteString(`/*
 * The generic getters: each simple device getter of nvml.h answers its key's
 * value from the GPU's getter table (getters.c), rounded. Each is weak (an
 * alias of its static gen_ body): a hand-written function of the same name in
 * another file wins at link time, and fake_gen_funcs[i].own() tells which
 * did.
 */
#include <stdbool.h>
#include <stddef.h>

#include "fakenvml.h"

`)
	// The selector values this table was made with, checked by the compiler.
	enums := map[string]*enum{}
	for _, g := range gs {
		if g.sel != nil {
			enums[g.sel.name] = g.sel
		}
	}
	var en []string
	for n := range enums {
		en = append(en, n)
	}
	sort.Strings(en)
	for _, n := range en {
		for _, c := range enums[n].sel {
			fmt.Fprintf(&b, "_Static_assert(%s == %d, \"nvml.h: %s\");\n", c.name, c.value, c.name)
		}
	}
	b.WriteString("\n")
	k := 0
	for i, g := range gs {
		fmt.Fprintf(&b, "static nvmlReturn_t gen_%s(%s)\n{\n", g.name, strings.Join(g.params, ", "))
		if g.sel != nil {
			b.WriteString("\tint k;\n")
			fmt.Fprintf(&b, "\tswitch ((int)%s) {\n", g.selName)
			for _, key := range g.keys() {
				fmt.Fprintf(&b, "\tcase %s:\n\t\tk = %d;\n\t\tbreak;\n", key[1], k)
				k++
			}
			b.WriteString("\tdefault:\n\t\treturn NVML_ERROR_INVALID_ARGUMENT;\n\t}\n")
		} else {
			fmt.Fprintf(&b, "\tint k = %d;\n", k)
			k++
		}
		b.WriteString("\tlong long v = 0;\n")
		fmt.Fprintf(&b, "\tnvmlReturn_t r = fake_gen_value(device, FCG_%s, k, %s != NULL, &v);\n", g.name, g.outName)
		if g.member != "" {
			fmt.Fprintf(&b, "\tif (r == NVML_SUCCESS)\n\t\t%s->%s = (%s)v;\n", g.outName, g.member, g.memType)
		} else {
			fmt.Fprintf(&b, "\tif (r == NVML_SUCCESS)\n\t\t*%s = (%s)v;\n", g.outName, g.outType)
		}
		b.WriteString("\treturn r;\n}\n")
		fmt.Fprintf(&b, "nvmlReturn_t DECLDIR %s(%s) __attribute__((weak, alias(\"gen_%s\")));\n", g.name, strings.Join(g.params, ", "), g.name)
		fmt.Fprintf(&b, "static bool own_%s(void) { return %s != gen_%s; }\n\n", g.name, g.name, g.name)
		_ = i
	}
	b.WriteString("const fake_gen_func fake_gen_funcs[] = {\n")
	for _, g := range gs {
		fmt.Fprintf(&b, "\t{\"%s\", own_%s},\n", g.name, g.name)
	}
	b.WriteString("\t{NULL, NULL},\n};\n\n")
	fmt.Fprintf(&b, "const fake_gen_key fake_gen_keys[FAKE_GEN_KEYS] = {\n")
	for i, g := range gs {
		for _, key := range g.keys() {
			fmt.Fprintf(&b, "\t{\"%s\", %d, %s, %s},\n", key[0], i, cnum(g.min), cnum(g.max))
		}
	}
	b.WriteString("};\n")
	return b.Bytes()
}

// goEnumName is c-for-go's name of a C enum typedef in go-nvml:
// nvmlClockType_t -> ClockType.
func goEnumName(c string) string {
	return strings.TrimSuffix(strings.TrimPrefix(c, "nvml"), "_t")
}

func writeGo(h *header, gs []getter) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "// %s\n\n//go:build cgo\n\npackage nvmltest\n\n", banner)
	b.WriteString("// simpleGetters are the simple device getters of nvml.h, by C name, each\n" +
		"// with the go-nvml type name of its selector (\"\" for none): the fake's\n" +
		"// generic getters (test/fakenvml/getters_gen.c), which the mock wires alike.\n")
	b.WriteString("var simpleGetters = map[string]string{\n")
	enums := map[string]*enum{}
	for _, g := range gs {
		s := ""
		if g.sel != nil {
			s = goEnumName(g.sel.name)
			enums[s] = g.sel
		}
		fmt.Fprintf(&b, "%q: %q,\n", g.name, s)
	}
	b.WriteString("}\n\n")
	b.WriteString("// selectorNames names a selector's value in a getter key, by go-nvml enum\n" +
		"// type name and value: the C constant without its enum's shared prefix\n" +
		"// (ClockType 1, NVML_CLOCK_SM: \"SM\").\n")
	b.WriteString("var selectorNames = map[string]map[int64]string{\n")
	var en []string
	for n := range enums {
		en = append(en, n)
	}
	sort.Strings(en)
	for _, n := range en {
		fmt.Fprintf(&b, "%q: {", n)
		for i, c := range enums[n].sel {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "%d: %q", c.value, strings.TrimPrefix(c.name, enums[n].prefix))
		}
		b.WriteString("},\n")
	}
	b.WriteString("}\n")
	src, err := format.Source(b.Bytes())
	if err != nil {
		fatal("gofmt: %v", err)
	}
	return src
}
