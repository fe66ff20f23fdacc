"""A steady GPU workload for the H200 check: holds a fixed amount of device
memory and runs bf16 matmuls at a fixed duty cycle, so that memory used,
power and utilization are stable enough to compare two readers."""
import argparse
import time

import torch

p = argparse.ArgumentParser()
p.add_argument("--device", type=int, default=0)
p.add_argument("--gib", type=float, default=8.0, help="device memory to hold")
p.add_argument("--seconds", type=float, default=60.0)
p.add_argument("--duty", type=float, default=0.5, help="fraction of each 100 ms busy")
a = p.parse_args()

dev = torch.device("cuda", a.device)
hold = torch.empty(int(a.gib * (1 << 30)), dtype=torch.uint8, device=dev)
x = torch.randn(8192, 8192, dtype=torch.bfloat16, device=dev)
period = 0.1
end = time.time() + a.seconds
while time.time() < end:
    t0 = time.time()
    while time.time() - t0 < a.duty * period:
        y = x @ x
        torch.cuda.synchronize(dev)
    time.sleep(max(0.0, period - (time.time() - t0)))
del hold
