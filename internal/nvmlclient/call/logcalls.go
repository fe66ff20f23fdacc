//go:build cgo

package call

import (
	"time"

	"go.uber.org/zap"
)

// FlapHoldOff is how long after a call's warn line a new failure of that
// call (a new episode, or a new cause) is counted rather than logged: a call
// that flaps every 30 s writes 4 lines in 10 minutes, not 40. The next line
// after the hold-off says how many failures went unlogged.
const FlapHoldOff = 5 * time.Minute

// callState is what a device's reads know of one call's failure: the log
// (callLog) keeps what it said of it.
type callState struct {
	failing  bool // failed at its last answer
	answered bool // succeeded since it failed (answeredAgain)
}

// LogCalls logs, at warn and without a stack trace, each call that fails
// for the first time or with a new cause, and at info the recovery of each
// call whose failure was logged. A call that keeps failing is logged once,
// however many scrapes it lasts; a call that flaps, once per FlapHoldOff.
func (d *GPU) LogCalls(failed []*Error) {
	if len(failed) == 0 && d.record.failingCount.Load() == 0 {
		return
	}
	failedNow := make([]bool, len(d.Table))
	var back []ID
	d.record.logMu.Lock()
	for _, f := range failed {
		failedNow[f.id] = true
		d.record.failing[f.id] = callState{failing: true}
	}
	n := int32(0)
	for c := range d.record.failing {
		st := &d.record.failing[c]
		if st.failing && st.answered && !failedNow[c] {
			*st = callState{}
			back = append(back, ID(c))
		}
		if st.failing {
			n++
		}
	}
	d.record.failingCount.Store(n)
	d.record.logMu.Unlock()
	for _, f := range failed {
		v := d.record.callLog.Fail(f.Call, f.cause())
		if !v.Log {
			continue
		}
		fields := []zap.Field{zap.String("call", f.Call), zap.Error(f)}
		if v.Unlogged > 0 {
			fields = append(fields, zap.Int("unlogged_failures", v.Unlogged))
		}
		d.Logger.Warn("NVML call failed; the metrics it feeds are left out until it answers again "+
			"(logged once per call and cause, and once when it recovers; a call that keeps flapping once per "+
			FlapHoldOff.String()+", with the failures not logged in between)", fields...)
	}
	for _, c := range back {
		if name := d.Table.Name(c); d.record.callLog.OK(name) {
			d.Logger.Info("NVML call recovered; the metrics it feeds are back", zap.String("call", name))
		}
	}
}

// answeredAgain records that c succeeded: if it was failing, the next Read
// logs that it is back.
func (d *GPU) answeredAgain(c ID) {
	if d.record.failingCount.Load() == 0 {
		return
	}
	d.record.logMu.Lock()
	if st := &d.record.failing[c]; st.failing {
		st.answered = true
	}
	d.record.logMu.Unlock()
}
