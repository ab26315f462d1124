"""An in-place op on a tensor autograd saved: sigmoid saves its output for its gradient,
and the forward scales that output in place, so the first backward fails."""
import torch
import torch.nn as nn


class Gate(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(16, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        g = torch.sigmoid(self.fc(x))
        g.mul_(2.0)  # in place on sigmoid's saved output
        return g.sum(dim=1)


torch.manual_seed(0)
model = Gate()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(10):
    x = torch.randn(32, 16)
    loss = (model(x) - 1.0).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
