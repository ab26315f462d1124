"""torch warns inside DataLoader iterators with stacklevel=2: pin_memory without an
accelerator (from the iterator's __init__), and an IterableDataset yielding more items
than its __len__ said (from __next__, naming the loop's line)."""
import torch
from torch.utils.data import DataLoader, IterableDataset


class Stream(IterableDataset):
    def __iter__(self):
        return iter(torch.arange(6.0).split(1))

    def __len__(self) -> int:
        return 4  # wrong on purpose

    def __repr__(self) -> str:  # the warning shows it: no address
        return "Stream()"


accelerator = getattr(torch, "accelerator", None)
no_accelerator = accelerator is None or not accelerator.is_available()
for batch in DataLoader(torch.arange(8.0), batch_size=4, pin_memory=no_accelerator):
    print(batch.sum().item())
loader = DataLoader(Stream(), batch_size=None)
print(len(loader))
for item in loader:
    print(item.item())
