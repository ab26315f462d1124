"""A fast.ai-course fit() loop: the epoch's loss sum kept as a tensor (`tot_loss += loss *
len(xb)`, which chains every step's graph) and read once per epoch with
`(tot_loss / count).item()`, a use that only a tensor allows."""
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
train_dl = DataLoader(TensorDataset(torch.randn(2048, 32), torch.randint(0, 4, (2048,))), batch_size=32,
                      shuffle=True)
model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for epoch in range(3):
    tot_loss, count = 0., 0
    for xb, yb in train_dl:
        loss = F.cross_entropy(model(xb), yb)
        loss.backward()
        opt.step()
        opt.zero_grad()
        tot_loss += loss * len(xb)
        count += len(xb)
    print(f"epoch {epoch} train_loss {(tot_loss / count).item():.4f}")
