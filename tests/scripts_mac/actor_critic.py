"""An actor-critic step as RL scripts write it: four actions a step, each drawn from
``torch.distributions.Categorical(logits=...)`` (the module path, a keyword argument), and
one ``Normal`` for exploration noise written over two lines. torch.distributions checks
every distribution's arguments by default (``validate_args``): on a Mac GPU each check
reads a result back (the logits when built, the action in ``log_prob``).

    python actor_critic.py      (STEPS=12)
"""
import os

import torch
import torch.distributions as D
from torch import nn

STEPS = int(os.environ.get("STEPS", "12"))
torch.manual_seed(0)
g = torch.Generator().manual_seed(0)
net = nn.Linear(8, 5)  # four action logits and a value
opt = torch.optim.SGD(net.parameters(), lr=0.05)
for step in range(STEPS):
    loss = torch.zeros(())
    for t in range(4):
        out = net(torch.randn(1, 8, generator=g))
        policy = torch.distributions.Categorical(logits=out[:, :4])
        action = policy.sample()
        loss = loss - policy.log_prob(action).sum() * out[:, 4].sum()
    noise = D.Normal(torch.zeros(1),
                     torch.ones(1) * 0.1)  # exploration
    loss = loss + noise.rsample().sum() * 0.0
    opt.zero_grad()
    loss.backward()
    opt.step()
print(f"final loss {loss.item():.6f}")
