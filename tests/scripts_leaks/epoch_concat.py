"""A Kaggle notebook's loop turned script: each batch's output, graph and all, appended to a
list made anew every epoch, concatenated after the epoch for its accuracy. The concatenation
lives on through the next epoch (nodes of many steps), but nothing chains one step's graph
to the next: the lists are bounded by the epoch. With ``--detached`` the outputs are kept
without their graphs (what a user may write after reading a fix)."""
import sys

import torch

torch.manual_seed(0)
X = torch.randn(2048, 32)
y = (X[:, :4].sum(1) > 0).float()
model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.SiLU(), torch.nn.Linear(64, 1))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
crit = torch.nn.BCEWithLogitsLoss()
for epoch in range(4):
    perm = torch.randperm(len(X))
    train_preds = []
    for b in range(0, len(X), 64):
        idx = perm[b:b + 64]
        out = model(X[idx]).squeeze(-1)
        loss = crit(out, y[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
        train_preds.append(out.detach() if "--detached" in sys.argv else out)
    tp = torch.cat(train_preds)
    acc = ((tp > 0).float() == y[perm]).float().mean().item()
    print(f"epoch {epoch} loss {loss.item():.4f} train_acc {acc:.3f}")
