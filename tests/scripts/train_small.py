"""A small deterministic training: DataLoader, optimizer, a warning per epoch."""
import warnings

import torch
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
data = TensorDataset(torch.randn(32, 4), torch.randn(32, 1))
loader = DataLoader(data, batch_size=4)
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for epoch in range(2):
    for x, y in loader:
        opt.zero_grad()
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
    warnings.warn(f"epoch {epoch} done")
print("loss", f"{loss.item():.8f}", "weights", [f"{v:.8f}" for v in model.weight.flatten().tolist()])
