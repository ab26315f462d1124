"""A CUDA tutorial's loop: the device is never named as a string, only `.cuda()`."""
from torch import nn, optim, randn

model = nn.Linear(8, 1).cuda()
opt = optim.SGD(model.parameters(), lr=0.1)
for step in range(3):
    x = randn(16, 8).cuda()
    loss = model(x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
print("done")
