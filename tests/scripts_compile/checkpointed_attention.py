"""A compiled attention block under activation checkpointing, as long-context recipes write
it: ``torch.utils.checkpoint`` (non-reentrant) around a block that calls
``F.scaled_dot_product_attention``, the model under ``torch.compile``. The compiled backward
recomputes the block with the forward's random state: AOT Autograd runs it through the
higher-order operators ``run_and_save_rng_state`` / ``run_with_rng_state``, on every backend
(``aot_eager`` here: it compiles in a second; inductor calls them from its generated code).

    python checkpointed_attention.py [--backend inductor] [--steps 6] [--device cuda]
"""
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint


class Attention(nn.Module):
    def __init__(self, dim: int = 64, heads: int = 4) -> None:
        super().__init__()
        self.qkv, self.proj, self.heads = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim), heads

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape
        q, k, v = self.qkv(x).view(B, T, 3, self.heads, C // self.heads).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return x + self.proj(y.transpose(1, 2).reshape(B, T, C))


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.block = Attention()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return checkpoint(self.block, x, use_reentrant=False)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", default="aot_eager")
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    torch.manual_seed(0)
    model = torch.compile(Model().to(args.device), backend=args.backend)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for step in range(args.steps):
        x = torch.randn(8, 32, 64, device=args.device)
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        print(f"step {step}: loss {loss.item():.6f}")


if __name__ == "__main__":
    main()
