"""A Lightning-style module without Lightning: its DataLoader takes its workers from
``self.hparams.num_workers`` (as ``save_hyperparameters()`` stores them), and its Dataset
sleeps 4 ms a sample (a slow read). The fix's number belongs where the module is built
(``Module(num_workers=N)``) or in its ``__init__`` default, not over ``self.hparams``. Its
40 steps read the loader's 20 batches twice (two epochs): its workers are worth keeping
from one pass to the next (``persistent_workers``).

    python hparams_workers.py [--steps 40]
"""
import argparse
import time

import torch
from torch.utils.data import DataLoader, Dataset


class SlowReads(Dataset):
    def __len__(self) -> int:
        return 320

    def __getitem__(self, i: int):
        time.sleep(0.004)  # the read
        return torch.randn(16), i % 2


class Module:
    def __init__(self, num_workers: int = 0, batch_size: int = 16) -> None:
        self.hparams = argparse.Namespace(num_workers=num_workers, batch_size=batch_size)
        self.model = torch.nn.Linear(16, 2)

    def train_dataloader(self) -> DataLoader:
        return DataLoader(SlowReads(), batch_size=self.hparams.batch_size, num_workers=self.hparams.num_workers)


parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=40)
steps = parser.parse_args().steps
module = Module(batch_size=16)
opt = torch.optim.SGD(module.model.parameters(), lr=0.1)
loader = module.train_dataloader()
step = 0
while step < steps:  # epochs until --steps: 40 read 20 batches twice (persistent_workers pays)
    for x, y in loader:
        loss = torch.nn.functional.cross_entropy(module.model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        step += 1
        if step == steps:
            break
print(f"trained with {module.hparams.num_workers} workers")
