package main

import (
	"encoding/json"
	"os"
	"path/filepath"
)

// blockStats is the persisted blocks' size on disk (chunks, index,
// tombstones, meta; not the head or its WAL) and the samples they hold.
type blockStats struct {
	blocks  int
	bytes   int64
	samples int64
	series  int64
}

func readBlocks(data string) blockStats {
	var st blockStats
	metas, _ := filepath.Glob(filepath.Join(data, "*", "meta.json"))
	for _, m := range metas {
		raw, err := os.ReadFile(m)
		if err != nil {
			continue
		}
		var meta struct {
			Stats struct {
				NumSamples int64 `json:"numSamples"`
				NumSeries  int64 `json:"numSeries"`
			} `json:"stats"`
		}
		if json.Unmarshal(raw, &meta) != nil {
			continue
		}
		st.blocks++
		st.samples += meta.Stats.NumSamples
		st.series += meta.Stats.NumSeries
		st.bytes += dirBytes(filepath.Dir(m))
	}
	return st
}

// bytesPerSample is the blocks' bytes over their samples: what a sample
// costs on disk once compacted, index included.
func (st blockStats) bytesPerSample() float64 {
	if st.samples == 0 {
		return 0
	}
	return float64(st.bytes) / float64(st.samples)
}

// dataEnd is the newest block's end (Unix milliseconds).
func dataEnd(data string) int64 {
	var end int64
	metas, _ := filepath.Glob(filepath.Join(data, "*", "meta.json"))
	for _, m := range metas {
		raw, err := os.ReadFile(m)
		if err != nil {
			continue
		}
		var meta struct {
			MaxTime int64 `json:"maxTime"`
		}
		if json.Unmarshal(raw, &meta) == nil && meta.MaxTime > end {
			end = meta.MaxTime
		}
	}
	return end
}
