"""REINFORCE as pytorch/examples' reinforcement_learning/reinforce.py writes it, on a toy
environment: each action is sampled from ``Categorical(probs)`` and read with
``action.item()`` for the environment, one optimizer step per episode. torch.distributions
checks its arguments by default (``validate_args``): on a Mac GPU each check reads a result
back, twice per action (the probabilities, then the sample in ``log_prob``).

    python policy_gradient.py [--episodes 12] [--no-validate]
"""
import argparse

import torch
import torch.nn.functional as F
from torch import nn
from torch.distributions import Categorical

parser = argparse.ArgumentParser()
parser.add_argument("--episodes", type=int, default=12)
parser.add_argument("--no-validate", action="store_true", help="Categorical(probs, validate_args=False)")
args = parser.parse_args()
torch.manual_seed(0)
g = torch.Generator().manual_seed(0)


class Policy(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.affine1, self.affine2 = nn.Linear(8, 64), nn.Linear(64, 2)

    def forward(self, x):
        return F.softmax(self.affine2(F.relu(self.affine1(x))), dim=1)


policy = Policy()
optimizer = torch.optim.Adam(policy.parameters(), lr=1e-2)
for episode in range(args.episodes):
    log_probs, rewards = [], []
    state = torch.randn(8, generator=g)
    for t in range(20):
        probs = policy(state.unsqueeze(0))
        m = Categorical(probs, validate_args=False) if args.no_validate else Categorical(probs)
        action = m.sample()
        log_probs.append(m.log_prob(action))
        a = action.item()
        rewards.append(float(a == int(state[0] > 0)))
        state = torch.randn(8, generator=g)
    returns = torch.tensor(rewards)
    returns = (returns - returns.mean()) / (returns.std() + 1e-6)
    loss = torch.cat([-lp * r for lp, r in zip(log_probs, returns, strict=True)]).sum()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print(f"last episode reward {sum(rewards):.0f}")
