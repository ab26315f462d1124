"""Trigger for `float64-mps-crash` (on a Mac): a NumPy array (float64) sent to MPS.

`torch.from_numpy` keeps NumPy's float64, and MPS has none: "Cannot convert a MPS Tensor
to float64 dtype as the MPS framework doesn't support float64. Please use float32
instead." The fix is `.float()` before `.to("mps")`.
"""

from __future__ import annotations

import numpy as np
import torch


def main() -> None:
    device = torch.device("mps" if torch.backends.mps.is_available() else "cpu")
    features = np.random.default_rng(0).normal(size=(64, 8))  # float64, NumPy's default
    model = torch.nn.Linear(8, 1).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.from_numpy(features).to(device)  # float64 -> MPS: TypeError on a Mac
    loss = model(x.float()).square().mean()
    opt.zero_grad()
    loss.backward()
    opt.step()


if __name__ == "__main__":
    main()
