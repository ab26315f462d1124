"""CUDA: a small MLP whose loss becomes NaN at a known step (NAN_AT, default 37) of STEPS
(default 300): its input is multiplied by inf at that step, the way an overflowed
activation poisons a step; the NaN gradients then poison the weights for good.
CLEAN=1: no NaN ever. The script never reads the loss but every 100 steps."""
import os

import torch

STEPS = int(os.environ.get("STEPS", "300"))
NAN_AT = int(os.environ.get("NAN_AT", "37"))
CLEAN = os.environ.get("CLEAN") == "1"


def main():
    torch.manual_seed(0)
    dev = torch.device("cuda")
    model = torch.nn.Sequential(torch.nn.Linear(32, 128), torch.nn.ReLU(), torch.nn.Linear(128, 128),
                                torch.nn.ReLU(), torch.nn.Linear(128, 1)).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(256, 32, device=dev)
    y = torch.randn(256, 1, device=dev)
    for step in range(STEPS):
        inputs = x * float("inf") if step == NAN_AT and not CLEAN else x
        loss = torch.nn.functional.mse_loss(model(inputs), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 100 == 0:
            print(f"step {step} loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
