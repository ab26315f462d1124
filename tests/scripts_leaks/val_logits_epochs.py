"""Every epoch's validation logits kept for a calibration plot at the end, computed without
torch.no_grad(): each epoch adds one tensor whose graph holds the pass's activations (about
4 MiB here), once per epoch: memory grows in a few steps, too few for a trend.
`--detached` keeps the logits with `.detach()`, `--no-grad` runs the pass under
torch.no_grad(): what a user writes after reading the fix."""
import sys

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
train = DataLoader(TensorDataset(torch.randn(1024, 64), torch.randint(0, 10, (1024,))), batch_size=64, shuffle=True)
xv, yv = torch.randn(4096, 64), torch.randint(0, 10, (4096,))
val = DataLoader(TensorDataset(xv, yv), batch_size=512)
model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 10))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)


def validate():
    model.eval()
    logits = torch.cat([model(x) for x, _ in val])
    model.train()
    return logits


all_val_logits = []
for epoch in range(14):
    for x, y in train:
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    if "--no-grad" in sys.argv:
        with torch.no_grad():
            logits = validate()
    else:
        logits = validate()
    if "--detached" in sys.argv:
        all_val_logits.append(logits.detach())
    else:
        all_val_logits.append(logits)
    print(f"epoch {epoch} val loss {nn.functional.cross_entropy(logits, yv).item():.4f}")
print("kept", len(all_val_logits))
