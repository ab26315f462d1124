"""Allocate past the per-process memory fraction: a real CUDA out-of-memory error."""
import torch

torch.cuda.set_per_process_memory_fraction(0.01)
model = torch.nn.Linear(1024, 1024).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
batch = 64
for step in range(10):
    x = torch.randn(batch, 1024, device="cuda")
    loss = model(x).square().mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    batch *= 8  # grows until the allocator refuses
