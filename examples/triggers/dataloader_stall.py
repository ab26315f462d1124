"""Trigger for `dataloader-stall` / `dataloader-stall-critical`: batches are built in the
training process (num_workers=0) and each one takes longer to load than the step takes
to compute, so the device waits for data.

    mpsprof run examples/triggers/dataloader_stall.py                         # critical (~75% wait)
    mpsprof run examples/triggers/dataloader_stall.py --load-ms 20 --compute-ms 80  # warning (~20%)

Loading and compute are simulated with fixed times (decoding a JPEG, a model step) so the
shares are the same on any machine; the fix mpsprof names is `num_workers=N`.
"""

from __future__ import annotations

import argparse
import time

import torch
from torch.utils.data import DataLoader, Dataset


class SlowDecode(Dataset):
    """Each batch costs ``load_s`` to 'decode' (a sleep: I/O and decoding release the GIL)."""

    def __init__(self, n: int, load_s: float) -> None:
        self.n, self.load_s = n, load_s

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        time.sleep(self.load_s)
        return torch.full((8,), float(i)), torch.tensor(float(i % 2))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--load-ms", type=float, default=30.0, help="loading time per batch")
    parser.add_argument("--compute-ms", type=float, default=10.0, help="compute time per step")
    args = parser.parse_args()
    model = torch.nn.Linear(8, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    # batch_size=None: one sample is one batch, so a batch costs exactly load_ms
    loader = DataLoader(SlowDecode(args.steps, args.load_ms / 1000), batch_size=None, num_workers=0)
    for x, y in loader:
        loss = (model(x).squeeze() - y) ** 2
        opt.zero_grad()
        loss.backward()
        opt.step()
        busy_until = time.perf_counter() + args.compute_ms / 1000  # the rest of a real step
        while time.perf_counter() < busy_until:
            pass
    print("done")


if __name__ == "__main__":
    main()
