"""Semi-supervised training (FixMatch-style): a small labeled loader cycled with
`itertools.cycle` beside a long unlabeled one, one labeled batch per step from
`next(labeled_iter)`. cycle keeps the first pass's batches (20 of them) and replays them, so
the labeled batches of the early sampled steps stay alive for good: a bounded number, not a
pile-up. The batches are small (16 x 24 float32, 1.5 KiB), so memory cannot tell: over the
run all of them add 30 KiB. With `--keep`, every step's labeled batch is also appended to
a list: one per step, for good (a leak)."""
import itertools
import sys

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
labeled = DataLoader(TensorDataset(torch.randn(320, 24), torch.randint(0, 3, (320,))), batch_size=16, shuffle=True)
unlabeled = DataLoader(TensorDataset(torch.randn(9600, 24)), batch_size=48, shuffle=True)
model = nn.Sequential(nn.Linear(24, 64), nn.ReLU(), nn.Linear(64, 3))
opt = torch.optim.SGD(model.parameters(), lr=0.03, momentum=0.9, nesterov=True)
labeled_iter = itertools.cycle(labeled)
kept = []
steps = 0
for (xu,) in unlabeled:
    xl, yl = next(labeled_iter)
    sup = nn.functional.cross_entropy(model(xl), yl)
    with torch.no_grad():
        conf, pseudo = model(xu).softmax(1).max(1)
    unsup = (nn.functional.cross_entropy(model(xu + 0.1 * torch.randn_like(xu)), pseudo, reduction="none")
             * (conf > 0.6).float()).mean()
    loss = sup + unsup
    opt.zero_grad()
    loss.backward()
    opt.step()
    if "--keep" in sys.argv:
        kept.append(xl.clone())
    steps += 1
print("steps", steps, "kept", len(kept))
