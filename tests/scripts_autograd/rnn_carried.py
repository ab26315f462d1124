"""A GRU language model trained with truncated backpropagation through time, written
the way it first gets written: the hidden state goes from one chunk into the next with
its history. The second backward reaches into the first chunk's freed graph; with
RETAIN=1 (torch's own hint, retain_graph=True) it gets one step further and fails on
the weights optimizer.step() changed in place."""
import os

import torch
import torch.nn as nn

torch.manual_seed(0)
text = torch.randint(0, 64, (40_000,))
emb = nn.Embedding(64, 32)
rnn = nn.GRU(32, 64, batch_first=True)
head = nn.Linear(64, 64)
params = [*emb.parameters(), *rnn.parameters(), *head.parameters()]
opt = torch.optim.Adam(params, lr=1e-3)
hidden = torch.zeros(1, 8, 64)
seq = 32
retain = os.environ.get("RETAIN") == "1"
for step in range(40):
    i = step * seq * 8
    chunk = text[i:i + seq * 8 + 8].view(8, -1)
    x, y = chunk[:, :seq], chunk[:, 1:seq + 1]
    out, hidden = rnn(emb(x), hidden)
    loss = nn.functional.cross_entropy(head(out).reshape(-1, 64), y.reshape(-1))
    opt.zero_grad()
    loss.backward(retain_graph=retain)
    opt.step()
    if step % 10 == 0:
        print(f"step {step} loss {loss.item():.3f}")
