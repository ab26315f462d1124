"""A short training that then asks the CPU allocator for far more memory than any machine
has (a wrong shape: 2**50 floats): the oom-crash-cpu finding names this line, and its fix
(a smaller batch, a checked size) is the user's to make, so `mpsprof patch` says so."""
import torch

torch.manual_seed(0)
model = torch.nn.Linear(8, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(5):
    x, y = torch.randn(4, 8), torch.randn(4, 1)
    loss = ((model(x) - y) ** 2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
buffer = torch.empty(2**50)  # the shape a bug made: 4 PiB
print(buffer.shape)
