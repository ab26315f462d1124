"""Trigger for `near-device-limit` (MPS or CUDA): the run peaks just under the limit.

It trains with a large buffer of activations held on the device, sized to ~93% of what
the allocator allows (MPS: recommended max memory x the watermark ratio; CUDA: total
memory). On a Mac the limit can exceed what is physically free, so the script first caps
the MPS limit at the recommended size (`PYTORCH_MPS_HIGH_WATERMARK_RATIO=1.0` with
`PYTORCH_MPS_LOW_WATERMARK_RATIO=0.8`, set before torch is imported) to stay clear of
swapping. Both: torch refuses a low ratio above the high one when the MPS allocator starts
(setLowWatermarkRatio in aten/src/ATen/mps/MPSAllocator.mm), and the default low ratio on
Apple silicon is 1.4. On a CPU-only machine it does nothing.
"""

from __future__ import annotations

import os

os.environ.setdefault("PYTORCH_MPS_HIGH_WATERMARK_RATIO", "1.0")
os.environ.setdefault(  # low <= high, or MPS refuses to start
    "PYTORCH_MPS_LOW_WATERMARK_RATIO", f"{0.8 * float(os.environ['PYTORCH_MPS_HIGH_WATERMARK_RATIO']):g}")

import torch

SHARE = 0.93


def main() -> None:
    if torch.backends.mps.is_available():
        device = torch.device("mps")
        limit = torch.mps.recommended_max_memory() * float(os.environ["PYTORCH_MPS_HIGH_WATERMARK_RATIO"])
    elif torch.cuda.is_available():
        device = torch.device("cuda")
        limit = torch.cuda.get_device_properties(0).total_memory
    else:
        print("no MPS or CUDA device: nothing to show here")
        return
    model = torch.nn.Linear(1024, 1024).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    held = torch.empty(int(limit * SHARE) // 4, dtype=torch.float32, device=device)
    held.fill_(1.0)
    for _ in range(40):
        x = torch.randn(64, 1024, device=device)
        loss = model(x).square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    del held


if __name__ == "__main__":
    main()
