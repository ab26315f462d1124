"""A clean, compute-bound training: data is in memory, the model's matmuls take the time."""
import os

import torch
from torch.utils.data import DataLoader, TensorDataset

STEPS = int(os.environ.get("STEPS", "60"))
WIDTH = int(os.environ.get("WIDTH", "1024"))


def main():
    torch.manual_seed(0)
    data = TensorDataset(torch.randn(STEPS * 16, WIDTH), torch.randn(STEPS * 16, 1))
    loader = DataLoader(data, batch_size=16, shuffle=True)
    model = torch.nn.Sequential(*[m for _ in range(4) for m in (torch.nn.Linear(WIDTH, WIDTH), torch.nn.ReLU())],
                                torch.nn.Linear(WIDTH, 1))
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    for step, (x, y) in enumerate(loader):
        for _ in range(3):  # a few forward/backward passes per batch: compute dominates
            loss = ((model(x) - y) ** 2).mean()
            opt.zero_grad()
            loss.backward()
        opt.step()
        if step % 10 == 0:
            print(f"step {step} loss {loss.item():.4f}", flush=True)


if __name__ == "__main__":
    main()
