#!/usr/bin/env bash
# Interleaved before/after benchmark rounds: runs each compiled test binary
# (go test -c) in turn, ROUNDS times, so that a machine's drift hits every
# build alike. Results go to $OUT/<binary>.txt for benchstat.
#
#   bash tools/bench-interleaved.sh DIR [ROUNDS] [BENCH]
#
# DIR holds the binaries (before.test, after.test, ...); BENCH is the
# -test.bench pattern (default: every benchmark of the package).
set -euo pipefail
dir=$1 rounds=${2:-10} bench=${3:-.}
out=${OUT:?set OUT}
mkdir -p "$out"
mapfile -t bins < <(find "$dir" -maxdepth 1 -name '*.test' -type f | sort)
[ ${#bins[@]} -gt 0 ] || { echo "no *.test in $dir" >&2; exit 1; }
for b in "${bins[@]}"; do chmod +x "$b"; : >"$out/$(basename "$b" .test).txt"; done
for r in $(seq "$rounds"); do
	for b in "${bins[@]}"; do
		# Each binary runs in the package folder it was built for only
		# when it reads testdata; the mock benchmarks do not.
		"$b" -test.run '^$' -test.bench "$bench" -test.benchmem -test.count 1 >>"$out/$(basename "$b" .test).txt"
	done
	echo "round $r of $rounds done"
done
