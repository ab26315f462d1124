"""Two loaders zipped at the top level of the script (no ``__main__`` guard); the second
one's samples are slow to read and it has no workers. The stall fix gives it workers, and
workers started by spawn (macOS) re-import the script: the patch must guard the training."""
import time

import torch
from torch.utils.data import DataLoader, Dataset, TensorDataset


class SlowPairs(Dataset):
    def __len__(self):
        return 192

    def __getitem__(self, i):
        time.sleep(0.003)  # a decode from disk
        return torch.full((8,), float(i % 7))


torch.manual_seed(0)
fast = TensorDataset(torch.randn(192, 8), torch.randint(0, 3, (192,)))
dl1 = DataLoader(fast, batch_size=16, shuffle=True)
dl2 = DataLoader(SlowPairs(), batch_size=16)
head = torch.nn.Linear(16, 3)
opt = torch.optim.SGD(head.parameters(), lr=0.1)
for epoch in range(3):
    for (x, y), b in zip(dl1, dl2):  # noqa: B905 (a user's script, as written)
        loss = torch.nn.functional.cross_entropy(head(torch.cat([x, b], dim=1)), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    print(f"epoch {epoch} loss {loss.item():.4f}")
