"""A Dataset whose record 77 is corrupt: a DataLoader worker raises in ``__getitem__``, and
torch re-raises it in the training process at the ``for`` line ("Caught ValueError in
DataLoader worker process 0. Original Traceback ..."). The fix belongs at the raise.

    python worker_raises.py
"""
import torch
from torch.utils.data import DataLoader, Dataset


class Records(Dataset):
    def __len__(self) -> int:
        return 256

    def __getitem__(self, i: int):
        if i == 77:
            raise ValueError(f"corrupt record {i}")
        return torch.randn(10), torch.tensor(float(i % 2))


def main() -> None:
    loader = DataLoader(Records(), batch_size=16, num_workers=2)
    model = torch.nn.Linear(10, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in loader:
        loss = torch.nn.functional.binary_cross_entropy_with_logits(model(x).squeeze(1), y)
        opt.zero_grad()
        loss.backward()
        opt.step()


if __name__ == "__main__":
    main()
