//go:build cgo

package nvmltest

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strings"
	"sync"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
)

//go:generate go run ../fakenvml/gen -c ../fakenvml -go selectors_gen.go

// The getter table: every simple device getter of nvml.h (simpleGetters,
// generated with the simulated library's from nvml.h) that setFuncs leaves
// unset answers GPU.Getters by key, with no code per getter: the getter's
// name, or name(SELECTOR) for one that takes an enum, SELECTOR the C constant
// without its enum's shared prefix (nvmlDeviceGetMaxClockInfo(SM),
// nvmlDeviceGetPcieThroughput(TX_BYTES)). A key missing from Getters answers
// its default, from getters.json (which the simulated library compiles in
// too), else NOT_SUPPORTED.

//go:embed getters.json
var gettersJSON []byte

// DefaultGetters are the getter table's values on every GPU, the mock's and
// the simulated library's: getters.json.
var DefaultGetters = func() map[string]float64 {
	var m map[string]float64
	if err := json.Unmarshal(gettersJSON, &m); err != nil {
		panic(fmt.Sprintf("nvmltest: getters.json: %v", err))
	}
	return m
}()

// wiredGetter is one ...Func field of mock.Device that the table answers.
type wiredGetter struct {
	index []int        // of the field in server.Device
	typ   reflect.Type // the func type
	name  string       // the C function
	// keys by selector value; key alone for a getter without one
	keys   map[int64]string
	key    string
	member int // the struct out's integer field, -1 for an integer out
}

var (
	wiredOnce sync.Once
	wired     []wiredGetter
)

func isInt(k reflect.Kind) bool {
	switch k {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return true
	}
	return false
}

// valueField is the integer field of a struct out: its only field besides
// an integer Version; -1 for anything else.
func valueField(t reflect.Type) int {
	if t.Kind() != reflect.Struct {
		return -1
	}
	f := -1
	for i := range t.NumField() {
		sf := t.Field(i)
		switch {
		case !isInt(sf.Type.Kind()):
			return -1
		case sf.Name == "Version":
		case f >= 0:
			return -1
		default:
			f = i
		}
	}
	return f
}

// wiredGetters finds, once, the fields of server.Device that the table
// answers: func() (N, nvml.Return) or func(E) (N, nvml.Return), N an
// integer, a bool (nonzero) or a struct of one integer besides Version, E the getter's
// selector enum, for the getters of simpleGetters.
func wiredGetters() []wiredGetter {
	wiredOnce.Do(func() {
		retType := reflect.TypeFor[nvml.Return]()
		for _, f := range reflect.VisibleFields(reflect.TypeFor[server.Device]()) {
			name, ok := strings.CutSuffix(f.Name, "Func")
			t := f.Type
			if !ok || !f.IsExported() || t.Kind() != reflect.Func || t.NumOut() != 2 || t.Out(1) != retType {
				continue
			}
			cname := "nvmlDevice" + name
			sel, ok := simpleGetters[cname]
			if !ok {
				continue
			}
			w := wiredGetter{index: f.Index, typ: t, name: cname, member: -1}
			if k := t.Out(0).Kind(); !isInt(k) && k != reflect.Bool { // go-nvml makes some a bool
				if w.member = valueField(t.Out(0)); w.member < 0 {
					continue
				}
			}
			switch {
			case sel == "" && t.NumIn() == 0:
				w.key = cname
			case sel != "" && t.NumIn() == 1 && t.In(0).Name() == sel && isInt(t.In(0).Kind()):
				w.keys = map[int64]string{}
				for v, s := range selectorNames[sel] {
					w.keys[v] = cname + "(" + s + ")"
				}
			default:
				continue
			}
			wired = append(wired, w)
		}
	})
	return wired
}

// getterKeys are every key the table answers.
func getterKeys() map[string]bool {
	ks := map[string]bool{}
	for _, w := range wiredGetters() {
		if w.keys == nil {
			ks[w.key] = true
		}
		for _, k := range w.keys {
			ks[k] = true
		}
	}
	return ks
}

// getter answers key from g.Getters, else the default; NaN in Getters makes
// it NOT_SUPPORTED.
func (g *GPU) getter(key string) (float64, nvml.Return) {
	g.mu.Lock()
	x, ok := g.Getters[key]
	g.mu.Unlock()
	if !ok {
		x, ok = DefaultGetters[key]
	}
	if !ok || math.IsNaN(x) {
		return 0, nvml.ERROR_NOT_SUPPORTED
	}
	return x, nvml.SUCCESS
}

// setGetters wires every getter of the table that setFuncs left unset to
// g.Getters.
func (g *GPU) setGetters(d *server.Device) {
	dv := reflect.ValueOf(d).Elem()
	notSupported := reflect.ValueOf(nvml.ERROR_NOT_SUPPORTED)
	invalid := reflect.ValueOf(nvml.ERROR_INVALID_ARGUMENT)
	for _, w := range wiredGetters() {
		fv := dv.FieldByIndex(w.index)
		if !fv.IsNil() {
			continue
		}
		out := w.typ.Out(0)
		zero := reflect.Zero(out)
		fv.Set(reflect.MakeFunc(w.typ, func(args []reflect.Value) []reflect.Value {
			key := w.key
			if w.keys != nil {
				var ok bool
				if key, ok = w.keys[selectorValue(args[0])]; !ok {
					return []reflect.Value{zero, invalid}
				}
			}
			x, ret := g.getter(key)
			if ret != nvml.SUCCESS {
				return []reflect.Value{zero, notSupported}
			}
			v := reflect.New(out).Elem()
			dst := v
			if w.member >= 0 {
				dst = v.Field(w.member)
			}
			setInt(dst, math.Round(x))
			return []reflect.Value{v, reflect.ValueOf(nvml.SUCCESS)}
		}))
	}
}

func selectorValue(v reflect.Value) int64 {
	if v.CanInt() {
		return v.Int()
	}
	return int64(v.Uint())
}

func setInt(v reflect.Value, x float64) {
	if v.Kind() == reflect.Bool {
		v.SetBool(x != 0)
	} else if v.CanInt() {
		v.SetInt(int64(x))
	} else {
		v.SetUint(uint64(x))
	}
}
