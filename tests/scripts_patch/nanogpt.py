"""A nanoGPT-style train.py, small: module-level config, ``get_batch`` from a token array,
a GPT of one block, AdamW, the ``while True`` loop with ``iter_num``. No DataLoader and no
``__main__`` guard, as in nanoGPT.

The mistake: every step's loss tensor is kept for a plot at the end (``losses.append(loss)``),
and with it the step's autograd graph: memory grows every step.
"""
import math
import os
import sys

import numpy as np
import torch
import torch.nn as nn
from torch.nn import functional as F

# -----------------------------------------------------------------------------
batch_size = 8
block_size = 32
n_embd = 64
n_head = 4
vocab_size = 128
learning_rate = 3e-3
max_iters = int(sys.argv[1]) if len(sys.argv) > 1 else 80
eval_interval = 10
device = 'cuda' if torch.cuda.is_available() else 'cpu'
# -----------------------------------------------------------------------------

torch.manual_seed(1337)
data = np.random.default_rng(0).integers(0, vocab_size, size=20000, dtype=np.uint16)  # train.bin


def get_batch():
    ix = torch.randint(len(data) - block_size, (batch_size,))
    x = torch.stack([torch.from_numpy((data[i:i + block_size]).astype(np.int64)) for i in ix])
    y = torch.stack([torch.from_numpy((data[i + 1:i + 1 + block_size]).astype(np.int64)) for i in ix])
    return x.to(device), y.to(device)


class CausalSelfAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(n_embd, dim=2)
        q, k, v = (t.view(B, T, n_head, C // n_head).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln_1 = nn.LayerNorm(n_embd)
        self.attn = CausalSelfAttention()
        self.ln_2 = nn.LayerNorm(n_embd)
        self.mlp = nn.Sequential(nn.Linear(n_embd, 4 * n_embd), nn.GELU(), nn.Linear(4 * n_embd, n_embd))

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte = nn.Embedding(vocab_size, n_embd)
        self.wpe = nn.Embedding(block_size, n_embd)
        self.h = Block()
        self.ln_f = nn.LayerNorm(n_embd)
        self.lm_head = nn.Linear(n_embd, vocab_size, bias=False)

    def forward(self, idx, targets):
        pos = torch.arange(idx.size(1), device=idx.device)
        x = self.ln_f(self.h(self.wte(idx) + self.wpe(pos)))
        logits = self.lm_head(x)
        return logits, F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


model = GPT().to(device)
optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate)
losses = []  # for the loss curve at the end
iter_num = 0
X, Y = get_batch()
while True:
    lr = learning_rate * 0.5 * (1 + math.cos(math.pi * iter_num / max_iters))
    for param_group in optimizer.param_groups:
        param_group['lr'] = lr
    logits, loss = model(X, Y)
    X, Y = get_batch()
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
    losses.append(loss)
    if iter_num % eval_interval == 0:
        print(f"iter {iter_num}: loss {loss.item():.4f}, lr {lr:.2e}")
    iter_num += 1
    if iter_num > max_iters:
        break
print(f"final loss {sum(x.item() for x in losses[-10:]) / 10:.4f} ({os.path.basename(__file__)})")
