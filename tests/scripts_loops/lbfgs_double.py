"""pytorch/examples time_sequence_prediction-style: a float64 model trained with LBFGS
(each ``opt.step(closure)`` evaluates the closure up to 20 times). STEPS optimizer steps."""
import os

import torch
import torch.nn as nn

STEPS = int(os.environ.get("STEPS", "2"))


class Sequence(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm1 = nn.LSTMCell(1, 16)
        self.linear = nn.Linear(16, 1)

    def forward(self, x):
        h = torch.zeros(x.size(0), 16, dtype=torch.double)
        c = torch.zeros(x.size(0), 16, dtype=torch.double)
        outputs = []
        for t in x.split(1, dim=1):
            h, c = self.lstm1(t, (h, c))
            outputs.append(self.linear(h))
        return torch.cat(outputs, dim=1)


torch.manual_seed(0)
t = torch.linspace(0, 6.28, 21, dtype=torch.double)
data = torch.sin(t.unsqueeze(0) + torch.rand(8, 1, dtype=torch.double))
inp, target = data[:, :-1], data[:, 1:]
seq = Sequence().double()
criterion = nn.MSELoss()
optimizer = torch.optim.LBFGS(seq.parameters(), lr=0.8)
for i in range(STEPS):
    def closure():
        optimizer.zero_grad()
        loss = criterion(seq(inp), target)
        loss.backward()
        return loss
    optimizer.step(closure)
print("steps", STEPS)
