"""k-fold cross-validation as a notebook writes it: per fold a fresh model, optimizer and
pair of loaders (Subset of one dataset); prints how many optimizer steps it made."""
import torch
from torch import nn
from torch.utils.data import DataLoader, Subset, TensorDataset

torch.manual_seed(0)
X = torch.randn(600, 12)
y = (X[:, :3].sum(1) > 0).long()
ds = TensorDataset(X, y)
idx = torch.randperm(len(ds)).tolist()
k, fold = 4, len(ds) // 4
updates = 0
for f in range(k):
    val_idx = idx[f * fold:(f + 1) * fold]
    train_loader = DataLoader(Subset(ds, idx[:f * fold] + idx[(f + 1) * fold:]), batch_size=30, shuffle=True)
    val_loader = DataLoader(Subset(ds, val_idx), batch_size=50)
    model = nn.Sequential(nn.Linear(12, 32), nn.ReLU(), nn.Linear(32, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(2):
        for xb, yb in train_loader:
            opt.zero_grad()
            nn.functional.cross_entropy(model(xb), yb).backward()
            opt.step()
            updates += 1
    with torch.no_grad():
        acc = sum((model(xb).argmax(1) == yb).sum().item() for xb, yb in val_loader) / len(val_idx)
    print(f"fold {f} acc {acc:.3f}")
print(f"optimizer steps {updates}")
