"""A fast training loader and a slow evaluation loader, evaluated every N steps under
no_grad (the plain-loop pattern). The evaluation loader's batches come in a few steps only:
the workers it needs follow from its own batches (load vs. the evaluation of one), not from
the training steps' compute, and no more than it has batches per pass."""

import argparse
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset, TensorDataset

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=120)
parser.add_argument("--every", type=int, default=30)
parser.add_argument("--sleep-ms", type=float, default=2.0)
parser.add_argument("--val-workers", type=int, default=0)
args = parser.parse_args()


class SlowEval(Dataset):
    """Each sample waits (a read), as an evaluation set on a slow disk does."""

    def __len__(self) -> int:
        return 128

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        time.sleep(args.sleep_ms / 1000.0)
        return torch.full((16,), float(i % 7)), i % 4


def main() -> None:
    torch.manual_seed(0)
    train_dl = DataLoader(TensorDataset(torch.randn(args.steps * 32, 16), torch.randint(0, 4, (args.steps * 32,))),
                          batch_size=32)
    val_dl = DataLoader(SlowEval(), batch_size=32, num_workers=args.val_workers,
                        persistent_workers=args.val_workers > 0)
    model = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    for step, (x, y) in enumerate(train_dl, 1):
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % args.every == 0:
            model.eval()
            with torch.no_grad():
                right = sum(int((model(vx).argmax(1) == vy).sum()) for vx, vy in val_dl)
            model.train()
            print(f"step {step} eval {right}/{len(val_dl.dataset)}")


if __name__ == "__main__":
    main()
