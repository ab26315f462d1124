"""Two losses on one forward, each with its own backward: the second finds the graph the
first backward freed."""
import torch
import torch.nn as nn

torch.manual_seed(0)
body = nn.Sequential(nn.Linear(16, 32), nn.Tanh())
heads = nn.ModuleList([nn.Linear(32, 1), nn.Linear(32, 1)])
opt = torch.optim.SGD([*body.parameters(), *heads.parameters()], lr=0.1)
for step in range(10):
    x = torch.randn(32, 16)
    feats = body(x)
    loss_a = heads[0](feats).pow(2).mean()
    loss_b = (heads[1](feats) - 1).pow(2).mean()
    opt.zero_grad()
    loss_a.backward()
    loss_b.backward()
    opt.step()
