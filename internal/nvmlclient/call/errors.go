package call

import "fmt"

// Error is an unexpected NVML error on one call of one device: the
// readings that call feeds are left out of the sample (nvmlclient's
// CallError). Its message names NVML's return code; the code itself stays
// in this package.
type Error struct {
	Call   string
	Detail string // e.g. the panic a call raised
	ret    returnCode
	id     ID
}

// ID is the call that failed.
func (e *Error) ID() ID { return e.id }

// cause names the failure for logging once: the call and its return code,
// without the detail, which may vary from one failure to the next (a
// panic's message carries lengths and indexes).
func (e *Error) cause() string { return fmt.Sprintf("%s/%d", e.Call, e.ret) }

func (e *Error) Error() string {
	if e.Detail != "" {
		return fmt.Sprintf("%s: %s", e.Call, e.Detail)
	}
	return fmt.Sprintf("%s: %v", e.Call, e.ret)
}
