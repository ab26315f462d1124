"""Sentences of different lengths as token-id tensors, batched by the DataLoader's default
collate_fn: the first batch stops the run ("stack expects each tensor to be equal size", or
"Trying to resize storage that is not resizable" in a worker). `--pad` batches them with the
collate_fn the collate-unequal-crash finding writes; `--own-stack` has equal samples but
stacks unequal tensors in the loop itself (the script's own bug, not collate's).

    python variable_lengths.py [--workers N] [--pad | --own-stack]
"""
import argparse

import torch
from torch.nn.utils.rnn import pad_sequence
from torch.utils.data import DataLoader, Dataset


class Sentences(Dataset):
    def __init__(self, n: int, equal: bool) -> None:
        g = torch.Generator().manual_seed(0)
        self.items = [torch.randint(1, 100, (12 if equal else 4 + i % 9,), generator=g) for i in range(n)]

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, i: int):
        return self.items[i], i % 2


def pad_collate(batch):                   # a list of (sample, label) pairs
    xs = pad_sequence([x for x, _ in batch], batch_first=True)
    return xs, torch.utils.data.default_collate([y for _, y in batch])


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--workers", type=int, default=0)
    p.add_argument("--pad", action="store_true")
    p.add_argument("--own-stack", action="store_true")
    args = p.parse_args()
    torch.manual_seed(0)
    extra = {"collate_fn": pad_collate} if args.pad else {}
    loader = DataLoader(Sentences(256, equal=args.own_stack), batch_size=16, num_workers=args.workers, **extra)
    emb, head = torch.nn.EmbeddingBag(100, 16), torch.nn.Linear(16, 2)
    opt = torch.optim.SGD([*emb.parameters(), *head.parameters()], lr=0.1)
    for step, (x, y) in enumerate(loader):
        if args.own_stack and step == 3:
            x = torch.stack([x[0], x[1, :-1]])
        loss = torch.nn.functional.cross_entropy(head(emb(x)), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    print("trained", step + 1, "batches")


if __name__ == "__main__":
    main()
