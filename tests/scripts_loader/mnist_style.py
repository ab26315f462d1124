"""pytorch/examples vae-style training: MNIST-like images stored compressed, decoded and
normalised one sample at a time in the training process (num_workers=0, as the example
runs without an accelerator). Each batch costs real CPU work to build: a real stall.
"""

from __future__ import annotations

import argparse
import math
import zlib

import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, Dataset


class CompressedDigits(Dataset):
    """Synthetic 28x28 uint8 digits, zlib-compressed like image files on disk."""

    def __init__(self, n: int) -> None:
        g = torch.Generator().manual_seed(1)
        self.blobs = [zlib.compress((torch.rand(28, 28, generator=g) * 255).to(torch.uint8).numpy().tobytes())
                      for _ in range(n)]
        self.blur = torch.tensor([[1.0, 2.0, 1.0], [2.0, 4.0, 2.0], [1.0, 2.0, 1.0]]).div(16).view(1, 1, 3, 3)

    def __len__(self) -> int:
        return len(self.blobs)

    def __getitem__(self, i: int):
        raw = zlib.decompress(self.blobs[i])  # "decode"
        img = torch.frombuffer(bytearray(raw), dtype=torch.uint8).view(1, 28, 28).float().div(255)  # ToTensor
        img = (img - 0.1307) / 0.3081  # Normalize
        angle = torch.tensor((i % 21 - 10) * math.pi / 180.0)  # RandomAffine-like augmentation
        theta = torch.stack([torch.stack([angle.cos(), -angle.sin(), torch.tensor(0.0)]),
                             torch.stack([angle.sin(), angle.cos(), torch.tensor(0.0)])]).unsqueeze(0)
        grid = F.affine_grid(theta, [1, 1, 28, 28], align_corners=False)
        img = F.grid_sample(img.unsqueeze(0), grid, align_corners=False)
        img = F.conv2d(img, self.blur, padding=1).squeeze(0)  # GaussianBlur-like
        return img.clamp(-1, 3), i % 10


class VAE(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.fc21, self.fc22 = nn.Linear(784, 400), nn.Linear(400, 20), nn.Linear(400, 20)
        self.fc3, self.fc4 = nn.Linear(20, 400), nn.Linear(400, 784)

    def forward(self, x):
        h = F.relu(self.fc1(x.view(-1, 784)))
        mu, logvar = self.fc21(h), self.fc22(h)
        z = mu + torch.randn_like(mu) * torch.exp(0.5 * logvar)
        return torch.sigmoid(self.fc4(F.relu(self.fc3(z)))), mu, logvar


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--workers", type=int, default=0)
    args = parser.parse_args()
    torch.manual_seed(1)
    data = CompressedDigits(args.steps * args.batch_size)
    loader = DataLoader(data, batch_size=args.batch_size, shuffle=True, num_workers=args.workers)
    model = VAE()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    model.train()
    for batch_idx, (x, _) in enumerate(loader):
        target = (x * 0.3081 + 0.1307).clamp(0, 1).view(-1, 784)
        opt.zero_grad()
        recon, mu, logvar = model(x)
        loss = F.binary_cross_entropy(recon, target, reduction="sum") - 0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
        loss.backward()
        opt.step()
        if batch_idx % 10 == 0:
            print(f"batch {batch_idx} loss {loss.item() / len(x):.2f}")


if __name__ == "__main__":
    main()
