package main

import (
	"path/filepath"
	"testing"
)

// The records the bench backfills, and checks for afterwards, are the
// shipped rule file's resampled counters, each in its own group's interval.
func TestSelectRecordsPicksTheResampledCounters(t *testing.T) {
	out := filepath.Join(t.TempDir(), "records.yaml")
	n := selectRecords("../../deploy/prometheus/rules.yaml", `^series:`, out)
	names := recordNames(out)
	if n == 0 || n != len(names) {
		t.Fatalf("selectRecords wrote %d records, recordNames read %d", n, len(names))
	}
	want := map[string]bool{
		"series:nvidia_gpu_held_time_seconds_total:5m":         true,
		"series:nvidia_gpu_process_held_time_seconds_total:5m": true,
	}
	for _, name := range names {
		delete(want, name)
	}
	if len(want) > 0 {
		t.Errorf("not selected: %v (selected %v)", want, names)
	}
	if got := selectRecords("../../deploy/prometheus/rules.yaml", `^no-such-record$`, filepath.Join(t.TempDir(), "none.yaml")); got != 0 {
		t.Errorf("a regexp that matches nothing selected %d records", got)
	}
}
