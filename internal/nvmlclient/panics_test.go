//go:build cgo

package nvmlclient

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Issue 17, defect 1: the panic's log line says what the read does with
// it: the call's readings are left out, the rest of the sample stands (as
// TestPanicInMockIsAnError checks); it never claims the sample is dropped.
func TestPanicLogSaysOnlyTheCallsFiguresAreLeftOut(t *testing.T) {
	m, c, logs := openH200(t)
	m.GPUs[7].GetPerformanceStateFunc = nil // a moq mock panics on a nil Func
	s, err := c.Devices()[7].Read()
	require.ErrorContains(t, err, "panic")
	require.True(t, s.Values[FigPower].OK, "the rest of the sample stands")
	lines := logs.FilterMessageSnippet("Recovered a panic").All()
	require.Len(t, lines, 1)
	msg := lines[0].Message
	assert.NotContains(t, msg, "sample is dropped")
	assert.Contains(t, msg, "readings of that call")
	assert.Contains(t, msg, "the rest of the GPU's sample stands")
}
