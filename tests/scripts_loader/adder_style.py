"""minGPT adder-style training (karpathy/minGPT projects/adder): a tiny GPT learns 2-digit
addition from a dataset that builds each sample from an index in microseconds, fed by a
DataLoader with 2 workers and an endless random sampler. The loader is never the problem.
"""

from __future__ import annotations

import argparse
import os

import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, Dataset, RandomSampler


class AdditionDataset(Dataset):
    """``a b`` and the reversed sum as digits, e.g. 85 + 50 -> "8550531"."""

    def __init__(self, ndigit: int = 2) -> None:
        self.ndigit = ndigit
        rng = torch.Generator().manual_seed(1337)
        self.ixes = torch.randperm((10**ndigit) ** 2, generator=rng)[500:]

    def __len__(self) -> int:
        return self.ixes.nelement()

    def __getitem__(self, idx: int):
        nd = 10**self.ndigit
        a, b = divmod(int(self.ixes[idx].item()), nd)
        render = f"{a:0{self.ndigit}d}{b:0{self.ndigit}d}" + f"{a + b:0{self.ndigit + 1}d}"[::-1]
        dix = [int(s) for s in render]
        x = torch.tensor(dix[:-1], dtype=torch.long)
        y = torch.tensor(dix[1:], dtype=torch.long)
        y[: self.ndigit * 2 - 1] = -1  # only the answer digits count
        return x, y


class TinyGPT(nn.Module):
    def __init__(self, vocab: int = 10, block: int = 6, n_embd: int = 48, n_layer: int = 3, n_head: int = 3) -> None:
        super().__init__()
        self.tok = nn.Embedding(vocab, n_embd)
        self.pos = nn.Parameter(torch.zeros(1, block, n_embd))
        layer = nn.TransformerEncoderLayer(n_embd, n_head, 4 * n_embd, dropout=0.1, batch_first=True, norm_first=True)
        self.blocks = nn.TransformerEncoder(layer, n_layer)
        self.head = nn.Linear(n_embd, vocab)
        self.register_buffer("mask", nn.Transformer.generate_square_subsequent_mask(block))

    def forward(self, idx, targets=None):
        t = idx.size(1)
        h = self.blocks(self.tok(idx) + self.pos[:, :t], mask=self.mask[:t, :t], is_causal=True)
        logits = self.head(h)
        loss = None if targets is None else F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)
        return logits, loss


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--max-iters", type=int, default=150)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--n-layer", type=int, default=3)
    parser.add_argument("--mark-dir", default=None, help="touch started / done here around the loop")
    args = parser.parse_args()
    torch.manual_seed(3407)
    data = AdditionDataset()
    model = TinyGPT(n_layer=args.n_layer)
    opt = torch.optim.AdamW(model.parameters(), lr=5e-4, betas=(0.9, 0.95), weight_decay=0.1)
    loader = DataLoader(data, sampler=RandomSampler(data, replacement=True, num_samples=int(1e10)),
                        shuffle=False, pin_memory=True, batch_size=64, num_workers=args.workers)
    model.train()
    data_iter = iter(loader)
    mark(args.mark_dir, "started")
    for it in range(args.max_iters):
        try:
            x, y = next(data_iter)
        except StopIteration:
            data_iter = iter(loader)
            x, y = next(data_iter)
        _, loss = model(x, y)
        model.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if it % 50 == 0:
            print(f"iter {it}: train loss {loss.item():.5f}")
    mark(args.mark_dir, "done")


def mark(folder: str | None, name: str) -> None:
    """Tell a test that the training loop starts or ends (it keeps the CPU busy meanwhile)."""
    if folder:
        open(os.path.join(folder, name), "w").close()


if __name__ == "__main__":
    main()
