"""Multi-task training that alternates two tasks' loaders step by step (task A on even
steps, task B on odd ones) with iter()/next() and a restart at StopIteration. Task B's
samples are slow to read (a sleep per sample stands for a decode) and its loader has no
workers: it holds back every other training step, and is no evaluation loader."""
import time

import torch
from torch.utils.data import DataLoader, Dataset, TensorDataset


class SlowAug(Dataset):
    def __init__(self, n):
        self.x = torch.randn(n, 16)
        self.y = torch.randint(0, 4, (n,))

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        time.sleep(0.001)
        return self.x[i], self.y[i]


def main():
    torch.manual_seed(0)
    loader_a = DataLoader(TensorDataset(torch.randn(1024, 16), torch.randint(0, 3, (1024,))), batch_size=16,
                          shuffle=True)
    loader_b = DataLoader(SlowAug(512), batch_size=16, shuffle=True)
    trunk = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU())
    heads = torch.nn.ModuleDict({"a": torch.nn.Linear(64, 3), "b": torch.nn.Linear(64, 4)})
    opt = torch.optim.Adam([*trunk.parameters(), *heads.parameters()], lr=1e-3)
    loaders = {"a": loader_a, "b": loader_b}
    its = {k: iter(v) for k, v in loaders.items()}
    for step in range(160):
        task = "a" if step % 2 == 0 else "b"
        try:
            x, y = next(its[task])
        except StopIteration:
            its[task] = iter(loaders[task])
            x, y = next(its[task])
        loss = torch.nn.functional.cross_entropy(heads[task](trunk(x)), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 40 == 0:
            print(f"step {step} task {task} loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
