"""pytorch/examples mnist_hogwild-style: NUM_PROCESSES trainers share one model
(``share_memory()``), each trains in its own torch.multiprocessing Process with a
DataLoader and an optimizer; the parent then evaluates. Synthetic data."""
import os

import torch
import torch.multiprocessing as mp
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

NUM_PROCESSES = int(os.environ.get("NUM_PROCESSES", "2"))
BATCHES = int(os.environ.get("BATCHES", "10"))


def dataset(seed):
    g = torch.Generator().manual_seed(seed)
    return TensorDataset(torch.randn(BATCHES * 16, 20, generator=g), torch.randint(0, 4, (BATCHES * 16,), generator=g))


def train(rank, model):
    torch.manual_seed(rank)
    loader = DataLoader(dataset(rank), batch_size=16, shuffle=True)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.5)
    steps = 0
    for data, target in loader:
        optimizer.zero_grad()
        F.cross_entropy(model(data), target).backward()
        optimizer.step()
        steps += 1
    print(f"trainer {rank}: {steps} steps", flush=True)


def test(model):
    model.eval()
    with torch.no_grad():
        for data, target in DataLoader(dataset(99), batch_size=64):
            F.cross_entropy(model(data), target)


if __name__ == "__main__":
    if os.environ.get("START_METHOD"):
        mp.set_start_method(os.environ["START_METHOD"], force=True)
    model = torch.nn.Sequential(torch.nn.Linear(20, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    model.share_memory()
    processes = []
    for rank in range(NUM_PROCESSES):
        p = mp.Process(target=train, args=(rank, model))
        p.start()
        processes.append(p)
    for p in processes:
        p.join()
    test(model)
