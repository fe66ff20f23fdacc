//go:build cgo

package nvmlclient

import (
	"reflect"
	"testing"

	"github.com/stretchr/testify/assert"
)

// Issue 26: a Device keeps its identity, its guard and its collectors; the
// rest lives in its call.GPU (its plan, its call record) and the collectors
// themselves.
func TestDeviceHasAtMostTwelveFields(t *testing.T) {
	assert.LessOrEqual(t, reflect.TypeOf(Device{}).NumField(), 12)
}
