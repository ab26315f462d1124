"""A LightningModule whose validation set loads slowly (each sample waits, as on a slow
disk), validated every 15 training batches: the evaluation loader is the one to change, in
``val_dataloader()``'s terms, with workers sized from its own batches.

Prints Lightning's own count: ``global_step N``.
"""

import time

import lightning as L
import torch
from torch.utils.data import DataLoader, Dataset, TensorDataset


class SlowEval(Dataset):
    def __len__(self):
        return 64

    def __getitem__(self, i):
        time.sleep(0.01)
        return torch.full((32,), float(i % 5)), i % 2


class Model(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 2))

    def training_step(self, batch, batch_idx):
        x, y = batch
        return torch.nn.functional.cross_entropy(self.net(x), y)

    def validation_step(self, batch, batch_idx):
        x, y = batch
        self.log("val_loss", torch.nn.functional.cross_entropy(self.net(x), y))

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.05)


def main():
    torch.manual_seed(0)
    train = DataLoader(TensorDataset(torch.randn(16 * 60, 32), torch.randint(0, 2, (16 * 60,))), batch_size=16)
    val = DataLoader(SlowEval(), batch_size=16)
    trainer = L.Trainer(max_epochs=1, accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0,
                        val_check_interval=15)
    trainer.fit(Model(), train, val)
    print(f"global_step {trainer.global_step}", flush=True)


if __name__ == "__main__":
    main()
