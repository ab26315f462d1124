"""Two optimizers stepping in each iteration (a GAN): one step per iteration."""
import torch
from torch import nn

torch.manual_seed(0)
G, D = nn.Linear(4, 4), nn.Linear(4, 1)
og, od = torch.optim.SGD(G.parameters(), lr=0.01), torch.optim.SGD(D.parameters(), lr=0.01)
for _ in range(25):
    z = torch.randn(8, 4)
    od.zero_grad(); D(G(z).detach()).mean().backward(); od.step()
    og.zero_grad(); (-D(G(z))).mean().backward(); og.step()
