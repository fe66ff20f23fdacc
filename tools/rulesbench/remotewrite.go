package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"log"
	"math"
	"net/http"
	"strconv"
	"strings"

	"github.com/klauspost/compress/snappy"
	"google.golang.org/protobuf/encoding/protowire"
)

// A live Prometheus holds its last two to three hours in the head, in
// memory; older samples are in blocks on disk, whose series a query
// decodes from the block's index. The bench writes the last headSpan
// through Prometheus's remote-write receiver, so that they land in its
// head (and its WAL, which the next start replays), and only what is
// older as blocks: the 5m and 1h windows then read what they read on a
// fleet's server.
const headSpan = 2 * 3600

// remoteWriteBatch is the series of one request: some 5,000, a few MB.
const remoteWriteBatch = 5000

// pushHead writes the samples of [from, to] of every simulated series to
// the server's remote-write receiver, ten minutes at a time in time
// order: the head takes a sample only within an hour of its newest one.
func pushHead(addr string, tmpl []series, cfg config, from, to int64) {
	const window = 600
	for t := from; t <= to; t += window {
		var buf bytes.Buffer
		if err := writeSlice(&buf, tmpl, cfg, t, min(t+window, to+1)); err != nil {
			log.Fatal(err)
		}
		batches, err := parseSamples(&buf)
		if err != nil {
			log.Fatal(err)
		}
		for i := 0; i < len(batches); i += remoteWriteBatch {
			remoteWrite(addr, batches[i:min(i+remoteWriteBatch, len(batches))])
		}
	}
}

// timeSeries is one series' samples in one request.
type timeSeries struct {
	labels  []label // sorted by name, __name__ among them, values unescaped
	samples []sample
}

type sample struct {
	t int64 // milliseconds
	v float64
}

// parseSamples reads writeSlice's OpenMetrics back into series, in the
// order they first appear, each with its samples in order.
func parseSamples(r io.Reader) ([]timeSeries, error) {
	index := map[string]int{}
	var out []timeSeries
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		sp := strings.LastIndexByte(line, ' ')
		if sp < 0 {
			return nil, fmt.Errorf("no timestamp: %q", line)
		}
		ts, err := strconv.ParseInt(line[sp+1:], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("timestamp: %w: %q", err, line)
		}
		body := line[:sp] // the series and its value
		vs := strings.LastIndexByte(body, ' ')
		if vs < 0 {
			return nil, fmt.Errorf("no value: %q", line)
		}
		s, err := parseLine(body)
		if err != nil {
			return nil, fmt.Errorf("%w: %q", err, line)
		}
		key := body[:vs]
		i, ok := index[key]
		if !ok {
			ls, err := rawLabels(s)
			if err != nil {
				return nil, fmt.Errorf("%w: %q", err, line)
			}
			i = len(out)
			index[key] = i
			out = append(out, timeSeries{labels: ls})
		}
		out[i].samples = append(out[i].samples, sample{t: ts * 1000, v: s.value})
	}
	return out, sc.Err()
}

// rawLabels is the series' labels with __name__, unescaped and sorted as
// remote write wants them.
func rawLabels(s series) ([]label, error) {
	ls := []label{{"__name__", s.name}}
	for _, l := range s.labels {
		v, err := strconv.Unquote(`"` + l.value + `"`)
		if err != nil {
			return nil, fmt.Errorf("label %s: %w", l.name, err)
		}
		ls = append(ls, label{l.name, v})
	}
	for i := 1; i < len(ls); i++ {
		if ls[i-1].name >= ls[i].name {
			return nil, fmt.Errorf("labels not sorted at %s", ls[i].name)
		}
	}
	return ls, nil
}

// encodeWriteRequest is Prometheus's remote-write 1.0 WriteRequest:
// timeseries = 1 { labels = 1 { name = 1, value = 2 }, samples = 2
// { value = 1 (double), timestamp = 2 (int64 ms) } }.
func encodeWriteRequest(series []timeSeries) []byte {
	var req, ts, msg []byte
	for _, s := range series {
		ts = ts[:0]
		for _, l := range s.labels {
			msg = msg[:0]
			msg = protowire.AppendTag(msg, 1, protowire.BytesType)
			msg = protowire.AppendString(msg, l.name)
			msg = protowire.AppendTag(msg, 2, protowire.BytesType)
			msg = protowire.AppendString(msg, l.value)
			ts = protowire.AppendTag(ts, 1, protowire.BytesType)
			ts = protowire.AppendBytes(ts, msg)
		}
		for _, smp := range s.samples {
			msg = msg[:0]
			msg = protowire.AppendTag(msg, 1, protowire.Fixed64Type)
			msg = protowire.AppendFixed64(msg, math.Float64bits(smp.v))
			msg = protowire.AppendTag(msg, 2, protowire.VarintType)
			msg = protowire.AppendVarint(msg, uint64(smp.t))
			ts = protowire.AppendTag(ts, 2, protowire.BytesType)
			ts = protowire.AppendBytes(ts, msg)
		}
		req = protowire.AppendTag(req, 1, protowire.BytesType)
		req = protowire.AppendBytes(req, ts)
	}
	return req
}

func remoteWrite(addr string, series []timeSeries) {
	body := snappy.Encode(nil, encodeWriteRequest(series))
	req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/api/v1/write", bytes.NewReader(body))
	if err != nil {
		log.Fatal(err)
	}
	req.Header.Set("Content-Encoding", "snappy")
	req.Header.Set("Content-Type", "application/x-protobuf")
	req.Header.Set("X-Prometheus-Remote-Write-Version", "0.1.0")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		log.Fatalf("remote write: %s: %s", resp.Status, msg)
	}
}
