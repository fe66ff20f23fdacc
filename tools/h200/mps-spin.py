"""Known-truth MPS client: one spinning thread on one SM, through PyTorch
alone (torch.cuda._sleep launches a one-thread kernel that spins for a
number of cycles), so that it runs where cupy is not installed. NVML's GPU
utilization reads ~100 % (a kernel is always running); SM activity reads
about 1/132 of an H200."""
import argparse
import time

import torch

p = argparse.ArgumentParser()
p.add_argument("--device", type=int, default=0)
p.add_argument("--seconds", type=float, default=60.0)
p.add_argument("--mib", type=int, default=512, help="device memory to hold")
a = p.parse_args()

dev = torch.device("cuda", a.device)
hold = torch.empty(a.mib << 20, dtype=torch.uint8, device=dev)
end = time.time() + a.seconds
with torch.cuda.device(dev):
    while time.time() < end:
        torch.cuda._sleep(200_000_000)  # ~0.1 s at ~2 GHz
        torch.cuda.synchronize(dev)
del hold
