"""CUDA, launch-bound: 48 tiny Linear layers, batch 16, no DataLoader. Each kernel runs
for a few microseconds, less than Python takes to launch it: the GPU idles most of the step.
BATCH changes the batch (the host-bound fix: more work per launch)."""
import os

import torch

STEPS = int(os.environ.get("STEPS", "300"))
BATCH = int(os.environ.get("BATCH", "16"))


def main():
    torch.manual_seed(0)
    dev = torch.device("cuda")
    layers = []
    for _ in range(48):
        layers += [torch.nn.Linear(64, 64), torch.nn.ReLU()]
    model = torch.nn.Sequential(*layers, torch.nn.Linear(64, 10)).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(BATCH, 64, device=dev)
    y = torch.randint(0, 10, (BATCH,), device=dev)
    loss_fn = torch.nn.CrossEntropyLoss()
    for step in range(STEPS):
        loss = loss_fn(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 100 == 0:
            print(f"step {step} loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
