"""The classic: model and inputs on the GPU, labels left on the CPU."""
import torch

model = torch.nn.Linear(8, 3).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(3):
    x = torch.randn(4, 8).cuda()
    y = torch.randint(0, 3, (4,))
    logits = model(x)
    loss = torch.nn.functional.cross_entropy(logits, y)  # y never moved: crashes here
    opt.zero_grad()
    loss.backward()
    opt.step()
