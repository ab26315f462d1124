"""Every step's predictions kept for an accuracy at the end: a plain tensor (no graph) a
step, appended to a module-level list, so memory grows all run long."""
import sys

import torch
from torch import nn

all_preds = []


def main(steps):
    torch.manual_seed(0)
    model = nn.Linear(256, 256)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for step in range(steps):
        x = torch.randn(512, 256)
        out = model(x)
        loss = out.pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        all_preds.append(out.detach() * 1.0)
        if step % 10 == 0:
            print(f"step {step} loss {loss.item():.4f}")
    print(f"kept {len(all_preds)} batches, mean {sum(p.mean().item() for p in all_preds) / len(all_preds):.4f}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 150)
