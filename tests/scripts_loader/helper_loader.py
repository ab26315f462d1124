"""pytorch/examples mnist layout: the loaders come from a helper, `make_loader(n,
batch_size, shuffle)`, whose `return DataLoader(Synthetic(n), ...)` builds the dataset
inside the call; the same helper builds the shuffled training loader and the unshuffled test
loader. 512 in-memory samples a batch are indexed and normalised one at a time against a
tiny step: dataloader-batch-indexing, whose fix must be the helper's own return line."""
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class Synthetic(Dataset):
    def __init__(self, n):
        g = torch.Generator().manual_seed(n)
        self.x = torch.randn(n, 16, generator=g)
        self.y = torch.randint(0, 4, (n,), generator=g)

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return (self.x[i] - 0.1) / 0.9, self.y[i]


def make_loader(n, batch_size, shuffle):
    return DataLoader(Synthetic(n), batch_size=batch_size, shuffle=shuffle)


def main():
    torch.manual_seed(1)
    model = nn.Linear(16, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    train_loader, test_loader = make_loader(512 * 6, 512, True), make_loader(1024, 512, False)
    for epoch in range(10):
        for x, y in train_loader:
            opt.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
        with torch.no_grad():
            correct = sum(model(x).argmax(1).eq(y).sum().item() for x, y in test_loader)
        print(f"epoch {epoch} test accuracy {correct}/1024")


if __name__ == "__main__":
    main()
