package main

import (
	"encoding/json"
	"log"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// blockStats is the persisted blocks' size on disk (chunks, index,
// tombstones, meta; not the head or its WAL) and the samples they hold.
type blockStats struct {
	blocks  int
	bytes   int64
	samples int64
	series  int64
}

// blockMeta is what the bench reads of a block's meta.json.
type blockMeta struct {
	dir     string
	MaxTime int64 `json:"maxTime"`
	Stats   struct {
		NumSamples int64 `json:"numSamples"`
		NumSeries  int64 `json:"numSeries"`
	} `json:"stats"`
}

// blockMetas reads every persisted block's meta.json under data; a block
// being written or removed meanwhile is passed over.
func blockMetas(data string) []blockMeta {
	var out []blockMeta
	paths, _ := filepath.Glob(filepath.Join(data, "*", "meta.json"))
	for _, p := range paths {
		raw, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		meta := blockMeta{dir: filepath.Dir(p)}
		if json.Unmarshal(raw, &meta) != nil {
			continue
		}
		out = append(out, meta)
	}
	return out
}

func readBlocks(data string) blockStats {
	var st blockStats
	for _, meta := range blockMetas(data) {
		st.blocks++
		st.samples += meta.Stats.NumSamples
		st.series += meta.Stats.NumSeries
		st.bytes += dirBytes(meta.dir)
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

// The simulated data's end (Unix seconds) is kept beside the TSDB for
// -reuse: its last hours are in the head's WAL, not in a block.
func writeDataEnd(dir string, end int64) {
	if err := os.WriteFile(filepath.Join(dir, "data-end"), []byte(strconv.FormatInt(end, 10)), 0o644); err != nil {
		log.Fatal(err)
	}
}

func readDataEnd(dir string) time.Time {
	b, err := os.ReadFile(filepath.Join(dir, "data-end"))
	if err != nil {
		log.Fatal(err)
	}
	end, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		log.Fatalf("data-end: %v", err)
	}
	return time.Unix(end, 0)
}
