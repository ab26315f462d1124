"""What a batch costs the training thread: built in-process (num_workers=0) vs taken in from
one worker process (num_workers=1), for batches of 1 to 32 small tensors.

The dataloader analyzer's handoff estimate (diagnosis/analyzers/loader_profile.py:
RECEIVE_BATCH_MS, RECEIVE_TENSOR_MS) comes from this. The training step is a sleep, so a
worker has time to keep up and what is left per batch is the handover. Prints, per batch
shape, both costs side by side and their ratio, measured in one run.

    OMP_NUM_THREADS=1 python benchmarks/handoff.py [--batches 150]
"""

from __future__ import annotations

import argparse
import time

import torch
from torch.utils.data import DataLoader, Dataset

STEP_S = 0.02


class Samples(Dataset[tuple[torch.Tensor, ...]]):
    def __init__(self, tensors: int, numel: int) -> None:
        self.tensors, self.numel = tensors, numel

    def __len__(self) -> int:
        return 1_000_000

    def __getitem__(self, i: int) -> tuple[torch.Tensor, ...]:
        return tuple(torch.zeros(self.numel) for _ in range(self.tensors))


def per_batch_ms(tensors: int, numel: int, workers: int, batches: int) -> tuple[float, float]:
    """(wall, CPU) ms per batch of the training process beyond the step's sleep (the sleep's
    own overshoot is measured apart); the CPU time is what a busy machine does not stretch."""
    it = iter(DataLoader(Samples(tensors, numel), batch_size=32, num_workers=workers))
    for _ in range(10):
        next(it)
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in range(batches):
        next(it)
        time.sleep(STEP_S)
    wall = ((time.perf_counter() - t0) / batches - STEP_S) * 1000.0
    return wall, (time.process_time() - c0) / batches * 1000.0


def sleep_overshoot_ms(n: int = 50) -> float:
    t0 = time.perf_counter()
    for _ in range(n):
        time.sleep(STEP_S)
    return ((time.perf_counter() - t0) / n - STEP_S) * 1000.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batches", type=int, default=150)
    args = ap.parse_args()
    torch.set_num_threads(1)
    over = sleep_overshoot_ms()
    print("ms per batch of 32 samples, the training process's wall (and CPU) time")
    print(f"{'tensors/batch':>13} {'in-process':>16} {'from a worker':>16} {'worker/in-process':>18}")
    for tensors in (1, 2, 4, 8, 32):
        here, here_cpu = per_batch_ms(tensors, 16, 0, args.batches)
        worker, worker_cpu = per_batch_ms(tensors, 16, 1, args.batches)
        here, worker = here - over, worker - over
        print(f"{tensors:>13} {here:>7.2f} ({here_cpu:>5.2f}) {worker:>7.2f} ({worker_cpu:>5.2f}) "
              f"{worker / max(here, 1e-6):>8.2f}x ({worker_cpu / max(here_cpu, 1e-6):.2f}x)")


if __name__ == "__main__":
    main()
