"""A shuffled training loader and an unshuffled evaluation loader of as many batches, the
evaluation pass run in the script's own loop after each epoch and its predictions compared
with the labels in order (so its order matters). Its 512-sample batches are indexed and
collated one sample at a time from memory: dataloader-batch-indexing's case, read between
the training steps."""
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
train_ds = TensorDataset(torch.randn(256, 16), torch.randint(0, 4, (256,)))
val_ds = TensorDataset(torch.randn(4096, 16), torch.randint(0, 4, (4096,)))
train_dl = DataLoader(train_ds, batch_size=32, shuffle=True)
val_dl = DataLoader(val_ds, batch_size=512)

model = nn.Linear(16, 4)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for epoch in range(10):
    for x, y in train_dl:
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    with torch.no_grad():
        preds = torch.cat([model(x).argmax(1) for x, _ in val_dl])
    acc = (preds == val_ds.tensors[1]).float().mean()
    print(f"epoch {epoch} loss {loss.item():.6f} val acc {acc:.6f}")
