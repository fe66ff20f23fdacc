"""A process that only holds GPU memory (issue 19): allocates --mib MiB on
--device, synchronizes, says "holding", and sleeps. It runs no kernel, so it
adds a process and its memory to the GPU and nothing to its utilization."""
import argparse
import time

import torch

p = argparse.ArgumentParser()
p.add_argument("--device", type=int, default=0)
p.add_argument("--mib", type=int, default=256)
p.add_argument("--seconds", type=float, default=600.0)
a = p.parse_args()

dev = torch.device("cuda", a.device)
hold = torch.empty(a.mib << 20, dtype=torch.uint8, device=dev)
torch.cuda.synchronize(dev)
print("holding", hold.numel(), "bytes on GPU", a.device, flush=True)
time.sleep(a.seconds)
