"""An 8-block attention model (~1,700 ops a step, a sampled step costs 40 ms or more on a
2-core machine) whose loop keeps every step's loss with its graph: `history.append(loss)`.
KEEP=item keeps `loss.item()` instead (the clean loop)."""
import os

import torch
from torch import nn

torch.manual_seed(0)
STEPS = int(os.environ.get("STEPS", "60"))
KEEP = os.environ.get("KEEP", "loss")


class Block(nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, 4, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.ln1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        return x + self.mlp(self.ln2(x))


model = nn.Sequential(*[Block(32) for _ in range(8)], nn.Linear(32, 10))
opt = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=False)
history = []
for step in range(STEPS):
    x = torch.randn(4, 8, 32)
    y = torch.randint(0, 10, (4, 8))
    loss = nn.functional.cross_entropy(model(x).reshape(-1, 10), y.reshape(-1))
    opt.zero_grad()
    loss.backward()
    opt.step()
    if KEEP == "loss":
        history.append(loss)
    else:
        history.append(loss.item())
print("final loss", history[-1] if KEEP != "loss" else history[-1].item())
