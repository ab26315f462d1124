"""A Dataset that returns a dict per sample ({"input": ..., "label": ...}), read by a
DataLoader with the default collate: its batches are dicts of tensors. Synthetic data."""
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset


class Samples(Dataset):
    def __init__(self):
        g = torch.Generator().manual_seed(0)
        self.x, self.y = torch.randn(640, 16, generator=g), torch.randint(0, 4, (640,), generator=g)

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return {"input": self.x[i], "label": self.y[i]}


torch.manual_seed(0)
loader = DataLoader(Samples(), batch_size=32, shuffle=True)
model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
opt = torch.optim.SGD(model.parameters(), 0.05)
for batch in loader:
    loss = nn.functional.cross_entropy(model(batch["input"]), batch["label"])
    opt.zero_grad()
    loss.backward()
    opt.step()
print(f"loss {loss.item():.6f}")
