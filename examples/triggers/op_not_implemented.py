"""Trigger for `op-not-implemented-crash` (on a Mac): an op without an MPS kernel.

`torch.linalg.eig` (aten::linalg_eig) has no MPS kernel: torch's native_functions.yaml
lists CPU and CUDA only. Without `PYTORCH_ENABLE_MPS_FALLBACK=1` it raises "The operator
'aten::linalg_eig' is not currently implemented for the MPS device". mpsprof names the
op and both fixes.
"""

from __future__ import annotations

import torch


def main() -> None:
    device = torch.device("mps" if torch.backends.mps.is_available() else "cpu")
    model = torch.nn.Linear(8, 8).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for _ in range(3):
        w = model(torch.randn(8, 8, device=device))
        spectrum, _ = torch.linalg.eig(w.detach())  # aten::linalg_eig: CPU and CUDA only
        loss = w.square().mean() + spectrum.abs().mean().real.to(w.dtype)
        opt.zero_grad()
        loss.backward()
        opt.step()


if __name__ == "__main__":
    main()
