#!/usr/bin/env bash
# Runs the receiver's mock scrape benchmark (BenchmarkScrape, 8 simulated
# H200s) from test binaries built here and gzipped into $CARRY (NAME.test.gz,
# e.g. base and head: go test -c ./receiver/nvmlreceiver/), interleaved
# round by round so that drift hits every build alike, each on one pinned
# core of the lent machine's quiet CPU. Writes NAME.txt per build under $OUT
# for benchstat. Reads no GPU.
set -eu
: "${OUT:?set OUT to a folder for the results}"
CARRY=${CARRY:-.carry-bench}
ROUNDS=${ROUNDS:-12}
CORE=${CORE:-2}
CARRY=$(cd "$CARRY" && pwd)
names=()
for f in "$CARRY"/*.test.gz; do
	gunzip -f "$f"
	n=$(basename "$f" .test.gz)
	chmod +x "$CARRY/$n.test"
	names+=("$n")
done
cd receiver/nvmlreceiver
for ((r = 1; r <= ROUNDS; r++)); do
	for n in "${names[@]}"; do
		taskset -c "$CORE" "$CARRY/$n.test" -test.run '^$' -test.bench 'BenchmarkScrape$' -test.benchmem \
			-test.benchtime 300x -test.count 1 | grep '^Benchmark' >>"$OUT/$n.txt"
	done
done
