"""CUDA: a CNN fed by a DataLoader without pin_memory: 24 MiB batches copied from pageable
memory with non_blocking=True (which then cannot overlap). PIN=1 pins them."""
import os

import torch
from torch.utils.data import DataLoader, Dataset

STEPS = int(os.environ.get("STEPS", "120"))


class Images(Dataset):
    """Pre-made images: indexing costs nothing, the copy is what is measured."""

    def __init__(self) -> None:
        g = torch.Generator().manual_seed(0)
        self.x = torch.randn(512, 3, 128, 128, generator=g)
        self.y = torch.randint(0, 10, (512,), generator=g)

    def __len__(self):
        return 100_000

    def __getitem__(self, i):
        return self.x[i % 512], self.y[i % 512]


def main():
    torch.manual_seed(0)
    dev = torch.device("cuda")
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 32, 3, stride=2, padding=1), torch.nn.ReLU(),
        torch.nn.Conv2d(32, 64, 3, stride=2, padding=1), torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(64, 10),
    ).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = DataLoader(Images(), batch_size=128, num_workers=4, persistent_workers=True,
                        pin_memory=os.environ.get("PIN") == "1")
    for step, (x, y) in enumerate(loader):
        x, y = x.to(dev, non_blocking=True), y.to(dev, non_blocking=True)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 50 == 0:
            print(f"step {step} loss {loss.item():.4f}")
        if step + 1 >= STEPS:
            break


if __name__ == "__main__":
    main()
