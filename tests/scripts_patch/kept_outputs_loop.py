"""Every step's predictions kept in a module-level list, only appended to and read back by
a ``for`` at the end (a plain tensor a step, no graph): memory grows all run long, and a
bounded deque keeps what the loop reads."""
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
    biggest = 0.0
    for p in all_preds:
        biggest = max(biggest, p.abs().max().item())
    print(f"largest prediction {biggest:.4f}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 150)
