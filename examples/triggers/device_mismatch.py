"""Trigger for `device-mismatch-crash`: an operation gets tensors from two devices.

On a Mac or a CUDA machine the inputs are moved to the GPU but the labels are not: the
classic crash ("Expected all tensors to be on the same device ..."). On a CPU-only
machine the model is built on the `meta` device (deferred initialisation that was never
materialised) while the data is on the CPU: "Tensor on device meta is not on the
expected device cpu!". mpsprof names the line and the fix.
"""

from __future__ import annotations

import torch
from torch import nn


def main() -> None:
    if torch.backends.mps.is_available():
        device = torch.device("mps")
    elif torch.cuda.is_available():
        device = torch.device("cuda")
    else:
        device = torch.device("meta")  # never materialised: no real weights anywhere
    model = nn.Linear(16, 4, device=device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loss_fn = nn.CrossEntropyLoss()
    for step in range(3):
        x = torch.randn(8, 16)
        y = torch.randint(0, 4, (8,))
        if device.type != "meta":
            x = x.to(device)  # the inputs move, the labels `y` stay on the CPU
        loss = loss_fn(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()


if __name__ == "__main__":
    main()
