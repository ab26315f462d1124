"""Losses kept as tensors in a list (not .item()): each keeps its step's graph root alive,
and the model's outputs appended to another list keep their activations."""
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.01)


def train(steps: int = 24) -> None:
    losses, outputs = [], []
    for step in range(steps):
        x, y = torch.randn(16, 32), torch.randint(0, 4, (16,))
        out = model(x)
        loss = nn.functional.cross_entropy(out, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss)
        outputs.append(out)
    print(f"last loss {losses[-1].item():.3f}, {len(outputs)} outputs kept")


if __name__ == "__main__":
    train()
