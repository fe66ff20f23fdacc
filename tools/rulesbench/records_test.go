package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The records the bench backfills, and checks for afterwards, are the
// shipped rule file's resampled counters, each in its own group's interval.
func TestSelectRecordsPicksTheResampledCounters(t *testing.T) {
	out := filepath.Join(t.TempDir(), "records.yaml")
	names := selectRecords("../../deploy/prometheus/rules.yaml", `^series:`, out)
	written, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		if !strings.Contains(string(written), "record: "+name+"\n") {
			t.Errorf("%s is not in the file written", name)
		}
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
	if got := selectRecords("../../deploy/prometheus/rules.yaml", `^no-such-record$`, filepath.Join(t.TempDir(), "none.yaml")); len(got) != 0 {
		t.Errorf("a regexp that matches nothing selected %v", got)
	}
}
