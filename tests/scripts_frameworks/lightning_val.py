"""A LightningModule with validation (Lightning runs 2 sanity-check batches first).

Env: STEPS (training batches, default 60), ACCUM (accumulate_grad_batches, default 1).
Prints Lightning's own count: ``global_step N``.
"""

import os

import lightning as L
import torch

STEPS = int(os.environ.get("STEPS", "60"))
ACCUM = int(os.environ.get("ACCUM", "1"))


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


def loader(n):
    data = torch.utils.data.TensorDataset(torch.randn(16 * n, 32), torch.randint(0, 2, (16 * n,)))
    return torch.utils.data.DataLoader(data, batch_size=16)


def main():
    torch.manual_seed(0)
    trainer = L.Trainer(max_epochs=1, accelerator="cpu", devices=1, accumulate_grad_batches=ACCUM,
                        logger=False, enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False, limit_val_batches=4)
    trainer.fit(Model(), loader(STEPS), loader(4))
    print(f"global_step {trainer.global_step}", flush=True)


if __name__ == "__main__":
    main()
