"""A training loop that is either input-bound or GPU-bound, for the
"input-bound or GPU-bound?" check (loaderbound-run.sh).

--mode cpu: a DataLoader whose workers do heavy CPU work per sample (and a
            small model), so the GPU waits on input.
--mode gpu: a trivial loader and large bf16 matmuls, so the GPU is the limit.
"""
import argparse
import time

import torch
from torch.utils.data import DataLoader, Dataset

p = argparse.ArgumentParser()
p.add_argument("--mode", choices=["cpu", "gpu"], required=True)
p.add_argument("--device", type=int, default=0)
p.add_argument("--seconds", type=float, default=90)
p.add_argument("--workers", type=int, default=4)
a = p.parse_args()


class Samples(Dataset):
    def __init__(self, heavy):
        self.heavy = heavy

    def __len__(self):
        return 1 << 30

    def __getitem__(self, i):
        if not self.heavy:
            # Trivial input: the GPU, not the loader, sets the pace.
            return torch.zeros(3, 8, 8)
        x = torch.randn(3, 224, 224)
        if self.heavy:
            # A costly augmentation: ~20 ms of CPU per sample.
            for _ in range(12):
                x = torch.nn.functional.avg_pool2d(x.unsqueeze(0), 3, 1, 1).squeeze(0) + 0.01 * torch.randn_like(x)
        return x


dev = torch.device("cuda", a.device)
heavy = a.mode == "cpu"
loader = DataLoader(Samples(heavy), batch_size=64, num_workers=a.workers, persistent_workers=True)
w = torch.randn(8192, 8192, dtype=torch.bfloat16, device=dev)
small = torch.nn.Conv2d(3, 16, 3).to(dev)
end = time.time() + a.seconds
steps = 0
for batch in loader:
    batch = batch.to(dev, non_blocking=True)
    if heavy:
        small(batch).sum().item()
    else:
        # ~100 ms of bf16 matmuls per step on an H200, against microseconds of input.
        y = w
        for _ in range(100):
            y = y @ w
        torch.cuda.synchronize(dev)
    steps += 1
    if time.time() > end:
        break
print(f"mode={a.mode} steps={steps}")
