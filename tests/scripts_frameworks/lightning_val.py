"""A LightningModule with validation (Lightning runs 2 sanity-check batches first).

Env: STEPS (training batches, default 60), ACCUM (accumulate_grad_batches, default 1),
SAMPLE_SLEEP (seconds each training sample sleeps in the Dataset, default 0: a loader that
waits, as on disk or network), LEAK=1: training_step keeps its logits in self.outs.
Prints Lightning's own count: ``global_step N``.
"""

import os
import time

import lightning as L
import torch

STEPS = int(os.environ.get("STEPS", "60"))
ACCUM = int(os.environ.get("ACCUM", "1"))


class Model(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 2))
        self.outs = []

    def training_step(self, batch, batch_idx):
        x, y = batch
        logits = self.net(x)
        if os.environ.get("LEAK") == "1":
            self.outs.append(logits)  # keeps every step's graph
        return torch.nn.functional.cross_entropy(logits, y)

    def validation_step(self, batch, batch_idx):
        x, y = batch
        self.log("val_loss", torch.nn.functional.cross_entropy(self.net(x), y))

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.05)


class Sleepy(torch.utils.data.TensorDataset):
    def __getitem__(self, i):
        time.sleep(float(os.environ.get("SAMPLE_SLEEP", "0")))
        return super().__getitem__(i)


def loader(n, train=False):
    data = (Sleepy if train else torch.utils.data.TensorDataset)(torch.randn(16 * n, 32), torch.randint(0, 2, (16 * n,)))
    return torch.utils.data.DataLoader(data, batch_size=16)


def main():
    torch.manual_seed(0)
    trainer = L.Trainer(max_epochs=1, accelerator="cpu", devices=1, accumulate_grad_batches=ACCUM,
                        logger=False, enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False, limit_val_batches=4)
    trainer.fit(Model(), loader(STEPS, train=True), loader(4))
    print(f"global_step {trainer.global_step}", flush=True)


if __name__ == "__main__":
    main()
