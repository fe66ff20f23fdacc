#!/usr/bin/env bash
# Runs on the lent H200 machine, from the repository root, with the probe
# built here (make h200-bundle) in .carry/: reads each figure new with
# driver 580 / go-nvml 0.13 (margin temperature, platform info, PCIe
# throughput, NVLink symbol errors and effective BER per link), raw and
# through the client, and writes what answered and what was NOT_SUPPORTED
# to $OUT/new-figures.txt. It only reads; it changes no GPU setting.
set -eu
: "${OUT:?set OUT to a folder for the results}"
mkdir -p "$OUT"
[ -e .carry/nvmlclientprobe.test.gz ] && gunzip -f .carry/nvmlclientprobe.test.gz
chmod +x .carry/nvmlclientprobe.test
nvidia-smi --query-gpu=index,name,driver_version --format=csv >"$OUT/new-figures-machine.txt" 2>&1 || true
(cd internal/nvmlclient && OUT="$OUT" ../../.carry/nvmlclientprobe.test -test.run '^TestH200NewFigures$' -test.v) \
	>"$OUT/new-figures.log" 2>&1
grep -c 'Not Supported' "$OUT/new-figures.txt" | sed 's/^/NOT_SUPPORTED answers: /'
