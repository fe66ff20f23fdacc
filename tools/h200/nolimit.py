"""The GPU processes of the no-limit diagnosis run (nolimit-run.sh), one mode
each, until --seconds pass or SIGTERM:

--mode loader:  a num_workers=0 data loader: each step does --cpu-ms (50) of
                Python CPU work in this process, then one bf16 8192^2 matmul
                and a synchronize (the loss.item() of a training step).
--mode batch50: back-to-back bf16 8192^2 matmuls, 50 per synchronize().
--mode sync1:   the same matmuls with a synchronize() after every one.
--mode sleep:   holds --gib of memory and sleeps (CPU 0, no kernel).

It prints its steps and matmuls per second when it stops, to compare with
what the receiver read.
"""
import argparse
import signal
import time

import torch

p = argparse.ArgumentParser()
p.add_argument("--mode", choices=["loader", "batch50", "sync1", "sleep"], required=True)
p.add_argument("--device", type=int, default=0)
p.add_argument("--seconds", type=float, default=600)
p.add_argument("--cpu-ms", type=float, default=50, help="loader: Python CPU work per step")
p.add_argument("--gib", type=float, default=2, help="sleep: device memory to hold")
a = p.parse_args()

stopping = False


def on_term(*_):
    global stopping
    stopping = True


signal.signal(signal.SIGTERM, on_term)
dev = torch.device("cuda", a.device)
end = time.time() + a.seconds
t0, steps, matmuls = time.time(), 0, 0

if a.mode == "sleep":
    hold = torch.empty(int(a.gib * (1 << 30)), dtype=torch.uint8, device=dev)
    torch.cuda.synchronize(dev)
    print("holding", hold.numel(), "bytes", flush=True)
    while not stopping and time.time() < end:
        time.sleep(0.2)
else:
    x = torch.randn(8192, 8192, dtype=torch.bfloat16, device=dev)
    y = x @ x  # cuBLAS's first call (its workspace, its heuristics) before the first step
    torch.cuda.synchronize(dev)
    print("running", a.mode, flush=True)
    while not stopping and time.time() < end:
        if a.mode == "loader":
            # The loader's work: a sample decoded and augmented in Python.
            busy_until, acc = time.perf_counter() + a.cpu_ms / 1000, 0
            while time.perf_counter() < busy_until:
                acc = (acc * 31 + 7) % 1000003
            y = x @ x
            torch.cuda.synchronize(dev)
            matmuls += 1
        elif a.mode == "batch50":
            for _ in range(50):
                y = x @ x
            torch.cuda.synchronize(dev)
            matmuls += 50
        else:
            y = x @ x
            torch.cuda.synchronize(dev)
            matmuls += 1
        steps += 1

dt = time.time() - t0
print("mode=%s seconds=%.1f steps=%d steps_per_s=%.2f matmuls_per_s=%.1f" % (
    a.mode, dt, steps, steps / dt, matmuls / dt), flush=True)
