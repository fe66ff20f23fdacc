package nvmlclient

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/otelcol-nvml/otelcol-nvml/internal/testutil/layers"
)

const importPath = "github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient"

// layerRanks gives each package under internal/nvmlclient its rank in the
// layout of docs/design/architecture.md, lowest first: a package imports
// only packages of a lower rank.
var layerRanks = map[string]int{
	"sample":  0, // what a read gives, and what can be asked for: Sample, Reading
	"guard":   0, // the call order: lane, GPM gate, one use, calls in flight
	"raw":     0, // the bounded list calls, straight to the library
	"call":    1, // the read table, the one way a call is made, its record of answers
	"collect": 2, // the collectors, one file each: GPM and utilization, getters, processes, fields, health, MIG, counters
	".":       3, // Client, Device, inventory, options, the event watcher: the receiver's one entry point
}

// Issue 26: the packages import only downward, in the order the
// architecture draws, and each package has a rank.
func TestPackagesImportOnlyDownward(t *testing.T) {
	assert.Empty(t, layers.Upward(t, ".", importPath, layerRanks))
}
