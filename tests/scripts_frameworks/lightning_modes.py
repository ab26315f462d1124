"""Lightning as users write it, by MODE: a LightningDataModule, max_steps; optional slow Dataset,
self.outs.append leak in training_step, accumulation + val_check_interval, torch.compile of the inner net.
MODE: clean | slowload | leak | accum_val | compile | after_eval (slowload, validation every 20 steps inside fit,
then trainer.validate() and trainer.test()) | collate_workers (2 persistent workers already, a collate_fn that
sleeps 30 ms a batch) (default clean); STEPS. Prints the framework's own step count last.
"""
import os
import time

import lightning as L
import torch
from torch.utils.data import DataLoader, Dataset

MODE = os.environ.get("MODE", "clean")
STEPS = int(os.environ.get("STEPS", "40"))


class Points(Dataset):
    def __init__(self, n, slow):
        g = torch.Generator().manual_seed(1)
        self.x = torch.randn(n, 64, generator=g)
        self.y = (self.x.sum(1) > 0).long()
        self.slow = slow

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        if self.slow:
            time.sleep(0.004)
        return self.x[i], self.y[i]


def slow_collate(items):
    time.sleep(0.03)  # padding and augmentation in Python, say: waiting, not computing
    return torch.utils.data.default_collate(items)


class Data(L.LightningDataModule):
    def __init__(self, batch):
        super().__init__()
        self.batch = batch

    def setup(self, stage=None):
        self.train_set = Points(self.batch * STEPS * 2, MODE in ("slowload", "after_eval"))
        self.val_set = Points(self.batch * (20 if MODE == "after_eval" else 6), False)

    def train_dataloader(self):
        if MODE == "collate_workers":
            return DataLoader(self.train_set, batch_size=self.batch, shuffle=True, num_workers=2,
                              persistent_workers=True, collate_fn=slow_collate)
        return DataLoader(self.train_set, batch_size=self.batch, shuffle=True)

    def val_dataloader(self):
        return DataLoader(self.val_set, batch_size=self.batch)

    def test_dataloader(self):
        return DataLoader(self.val_set, batch_size=self.batch)


class Classifier(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.GELU(), torch.nn.Linear(128, 2))
        if MODE == "compile":
            self.net = torch.compile(self.net)
        self.outs = []

    def training_step(self, batch, batch_idx):
        x, y = batch
        logits = self.net(x)
        if MODE == "leak":
            self.outs.append(logits)
        loss = torch.nn.functional.cross_entropy(logits, y)
        self.log("train_loss", loss)
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        self.log("val_loss", torch.nn.functional.cross_entropy(self.net(x), y))

    def test_step(self, batch, batch_idx):
        x, y = batch
        self.log("test_loss", torch.nn.functional.cross_entropy(self.net(x), y))

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=1e-3)


def main():
    torch.manual_seed(0)
    kw = {}
    if MODE == "accum_val":
        kw = dict(accumulate_grad_batches=3, val_check_interval=15, limit_val_batches=3)
    elif MODE == "after_eval":
        kw = dict(val_check_interval=20)
    else:
        kw = dict(limit_val_batches=0)
    batch = 64 if MODE == "leak" else 32
    trainer = L.Trainer(max_steps=STEPS, accelerator="cpu", devices=1, logger=False,
                        enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False, **kw)
    model, data = Classifier(), Data(batch)
    trainer.fit(model, datamodule=data)
    if MODE == "after_eval":
        trainer.validate(model, datamodule=data, verbose=False)
        trainer.test(model, datamodule=data, verbose=False)
    print(f"global_step {trainer.global_step}", flush=True)


if __name__ == "__main__":
    main()
