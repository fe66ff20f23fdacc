"""Known-truth workload: one 32-thread block spinning on one SM.

NVML's GPU utilization reads ~100 % (a kernel is always running) while GPM's
SM activity reads ~1/132 of the SMs on an H200."""
import argparse
import time

import cupy as cp

p = argparse.ArgumentParser()
p.add_argument("--device", type=int, default=0)
p.add_argument("--seconds", type=float, default=60.0)
a = p.parse_args()

spin = cp.RawKernel(r'''
extern "C" __global__ void spin(long long cycles) {
    long long t0 = clock64();
    while (clock64() - t0 < cycles) { }
}''', "spin")

with cp.cuda.Device(a.device):
    end = time.time() + a.seconds
    while time.time() < end:
        spin((1,), (32,), (cp.int64(200_000_000),))  # ~0.1 s at ~2 GHz
        cp.cuda.Device(a.device).synchronize()
