//go:build cgo

package nvmlclient

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/otelcol-nvml/otelcol-nvml/test/nvmltest"
)

// nvmlEventSetWait cannot be interrupted: an event that arrives in the
// wait during which the watcher was stopped is not delivered, so a stopped
// watcher never reports beside the one that replaced it.
func TestStoppedWatcherDeliversNoLateEvent(t *testing.T) {
	m := nvmltest.NewH200GPUs(1)
	waiting, release := make(chan struct{}, 1), make(chan struct{})
	m.EventSetCreateFunc = func() (nvml.EventSet, nvml.Return) {
		return &mock.EventSet{
			WaitFunc: func(uint32) (nvml.EventData, nvml.Return) {
				waiting <- struct{}{}
				<-release
				return nvml.EventData{Device: m.Devices[0], EventType: nvml.EventTypeXidCriticalError, EventData: 79}, nvml.SUCCESS
			},
			FreeFunc: func() nvml.Return { return nvml.SUCCESS },
		}, nvml.SUCCESS
	}
	c := New(m, zap.NewNop())
	require.NoError(t, c.Open(nil))
	defer c.Close(context.Background())
	ctx, cancel := context.WithCancel(context.Background())
	var delivered atomic.Int32
	done := make(chan error, 1)
	go func() { done <- c.WatchEvents(ctx, func(Event) { delivered.Add(1) }, time.Second) }()
	<-waiting
	cancel()
	close(release)
	select {
	case err := <-done:
		assert.NoError(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("the watcher did not return")
	}
	assert.Zero(t, delivered.Load(), "an event of the wait it was stopped in")
}
