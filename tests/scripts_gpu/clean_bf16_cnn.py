"""CUDA, done right: bf16 autocast, channels_last, pinned batches copied non_blocking,
workers; a model large enough to keep the GPU busy. Expect no warning."""
import os

import torch
from torch.utils.data import DataLoader, Dataset

STEPS = int(os.environ.get("STEPS", "150"))


class Images(Dataset):
    def __init__(self) -> None:
        g = torch.Generator().manual_seed(0)
        self.x = torch.randn(256, 3, 64, 64, generator=g)
        self.y = torch.randint(0, 100, (256,), generator=g)

    def __len__(self):
        return 100_000

    def __getitem__(self, i):
        return self.x[i % 256], self.y[i % 256]


def block(cin, cout):
    return [torch.nn.Conv2d(cin, cout, 3, padding=1, bias=False), torch.nn.BatchNorm2d(cout), torch.nn.ReLU()]


def main():
    torch.manual_seed(0)
    torch.backends.cudnn.benchmark = True
    dev = torch.device("cuda")
    model = torch.nn.Sequential(
        *block(3, 128), *block(128, 256), torch.nn.MaxPool2d(2), *block(256, 512), *block(512, 512),
        torch.nn.MaxPool2d(2), *block(512, 512), torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(),
        torch.nn.Linear(512, 100),
    ).to(dev, memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loader = DataLoader(Images(), batch_size=128, num_workers=4, pin_memory=True, persistent_workers=True)
    for step, (x, y) in enumerate(loader):
        x = x.to(dev, non_blocking=True).to(memory_format=torch.channels_last)
        y = y.to(dev, non_blocking=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if step % 50 == 0:
            print(f"step {step} loss {loss.item():.4f}")
        if step + 1 >= STEPS:
            break


if __name__ == "__main__":
    main()
