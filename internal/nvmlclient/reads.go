package nvmlclient

// Read is one plain reading of a GPU: one NVML getter, or one field of the
// GPU's nvmlDeviceGetFieldValues batch, with its scale and cadence. A
// client reads each of its WithReads and puts the value, in SI units, in
// Sample.Values at the read's place. Getter, GetterOf and Field make one
// (reads_cgo.go); the methods below set the rest.
type Read struct {
	// Name is the NVML function, with its selector or field where it has
	// one, as logged and in CallStats: nvmlDeviceGetClockInfo(SM).
	Name string

	get     any // func(nvml.Device) (float64, nvml.Return): a getter
	field   uint32
	divisor float64
	costly  bool
	counter bool
	links   int // 0: one field; linksSum, linksMax: per NVLink, folded
	decode  func(float64) float64
	valid   func(float64) bool
}

const (
	linksSum = 1 + iota
	linksMax
)

// Divisor divides the raw value by d to give the SI unit: 1000 for
// milliwatts to watts, 1e-6 for MHz to Hz.
func (r Read) Divisor(d float64) Read { r.divisor = d; return r }

// Costly reads it on the counters' cadence (WithCounterInterval), off the
// scrape path: a call too slow for every scrape, or a value that never
// changes. Its value comes with Sample.CountersTime.
func (r Read) Costly() Read { r.costly = true; return r }

// Counter marks a cumulative count, read on the counters' cadence: it never
// goes down but by a reset, after which Sample.CountersSince gives its new
// start.
func (r Read) Counter() Read { r.costly, r.counter = true, true; return r }

// SumLinks reads a field once per NVLink and sums the links that answer;
// MaxLinks takes the worst link's.
func (r Read) SumLinks() Read { r.links = linksSum; return r }

// MaxLinks reads a field once per NVLink and keeps the largest value.
func (r Read) MaxLinks() Read { r.links = linksMax; return r }

// Decode turns a raw field value into a number before Per.
func (r Read) Decode(f func(float64) float64) Read { r.decode = f; return r }

// Valid says which raw values are readings; the others are left out.
func (r Read) Valid(f func(float64) bool) Read { r.valid = f; return r }

// Named sets the name logged, where the getter's own is not the one to
// show.
func (r Read) Named(name string) Read { r.Name = name; return r }

// IsCostly reports whether the read is made on the counters' cadence.
func (r Read) IsCostly() bool { return r.costly }
