"""Epoch-level accuracy: each epoch collects its detached logits and its labels in lists made
anew at the epoch's start, then concatenates them (a classification script's metrics)."""
import torch
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
ds = TensorDataset(torch.randn(64 * 30, 128), torch.randint(0, 10, (64 * 30,)))
loader = DataLoader(ds, batch_size=64, shuffle=True)
model = torch.nn.Sequential(torch.nn.Linear(128, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
for epoch in range(3):
    all_logits, all_labels = [], []
    for x, y in loader:
        logits = model(x)
        loss = torch.nn.functional.cross_entropy(logits, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        all_logits.append(logits.detach())
        all_labels.append(y)
    acc = (torch.cat(all_logits).argmax(1) == torch.cat(all_labels)).float().mean()
    print(f"epoch {epoch} acc {acc:.3f}")
