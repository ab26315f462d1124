"""A small transformer encoder whose attention calls F.scaled_dot_product_attention:
on a Mac SDPA runs on MPS (its math / MPS path), whatever kernel this machine picks."""
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=10)
args = parser.parse_args()
torch.manual_seed(0)
device = torch.device("cpu")


class Attention(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(x).view(B, T, 3, self.heads, C // self.heads).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(B, T, C))


class Block(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.attn = Attention(dim, heads)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


model = nn.Sequential(nn.Embedding(100, 32), Block(32, 4), Block(32, 4), nn.LayerNorm(32), nn.Linear(32, 100)).to(device)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)

if __name__ == "__main__":
    for step in range(args.steps):
        x = torch.randint(0, 100, (8, 32), device=device)
        logits = model(x[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, 100), x[:, 1:].reshape(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    print(f"loss {loss.item():.3f}")
