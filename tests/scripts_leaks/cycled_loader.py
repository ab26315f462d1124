"""A step budget over `itertools.cycle(loader)`: cycle keeps the first pass's batches (32 of
them, made by the collate function) and replays them, so the batches of the early sampled
steps stay alive for good, but nothing piles up after the first pass: memory is flat. With
`--keep`, every step's batch is also appended to a list: the same rate, for good (a leak)."""
import itertools
import sys

import torch
from torch import nn
from torch.utils.data import DataLoader


def collate(samples):
    return torch.tensor(samples, dtype=torch.float32)[:, None].remainder(13).expand(-1, 256).clone()


torch.manual_seed(0)
model = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 256))
opt = torch.optim.SGD(model.parameters(), lr=1e-4)
loader = DataLoader(range(32 * 64), batch_size=64, collate_fn=collate)
kept = []
for step, x in enumerate(itertools.cycle(loader)):
    if step == 500:
        break
    loss = ((model(x) - x) ** 2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    if "--keep" in sys.argv:
        kept.append(x.clone())
print("steps", step, "kept", len(kept))
