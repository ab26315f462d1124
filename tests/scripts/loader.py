"""DataLoader with two workers started by argv[1] (spawn or fork); 2 epochs of 6 steps."""
import sys

import torch
from torch.utils.data import DataLoader, Dataset


class Squares(Dataset):
    def __len__(self):
        return 24

    def __getitem__(self, i):
        return torch.tensor([float(i)]), torch.tensor([float(i * i)])


def main():
    torch.manual_seed(0)
    model = torch.nn.Linear(1, 1)
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)
    loader = DataLoader(Squares(), batch_size=4, num_workers=2, multiprocessing_context=sys.argv[1],
                        persistent_workers=True)
    seen = []
    for epoch in range(2):
        for x, y in loader:
            opt.zero_grad()
            loss = ((model(x) - y) ** 2).mean()
            loss.backward()
            opt.step()
            seen.append(int(x.sum()))
    print("batches", len(seen), "sum", sum(seen), "loss", f"{loss.item():.4f}")


if __name__ == "__main__":
    main()
