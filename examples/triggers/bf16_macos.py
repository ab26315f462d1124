"""Trigger for `bf16-macos-crash` (on a Mac with macOS 13 or older): bfloat16 on MPS.

"MPS BFloat16 is only supported on MacOS 14 or newer": autocast to float16 instead, or
update macOS.
"""

from __future__ import annotations

import torch


def main() -> None:
    device = torch.device("mps" if torch.backends.mps.is_available() else "cpu")
    model = torch.nn.Linear(8, 1).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(16, 8, device=device, dtype=torch.bfloat16)
    loss = model(x.float()).square().mean()
    opt.zero_grad()
    loss.backward()
    opt.step()


if __name__ == "__main__":
    main()
