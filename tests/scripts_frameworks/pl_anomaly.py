"""A Lightning regression whose Trainer is built with ``detect_anomaly=True`` (Lightning's fit
loop then runs every step under ``torch.autograd.set_detect_anomaly(True)``): the finding must
name this script's Trainer line, not Lightning's, and patch must turn the argument off.
Synthetic data, CPU, a few seconds."""

import lightning as L
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


class LitReg(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(32, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 1))

    def training_step(self, batch, idx):
        x, y = batch
        loss = nn.functional.mse_loss(self.net(x).squeeze(-1), y)
        self.log("train_loss", loss)
        return loss

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=1e-3)


if __name__ == "__main__":
    L.seed_everything(0)
    X = torch.randn(4096, 32)
    ds = TensorDataset(X, X.sum(1))
    trainer = L.Trainer(max_epochs=1, detect_anomaly=True, accelerator="cpu", logger=False,
                        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False)
    trainer.fit(LitReg(), DataLoader(ds, batch_size=64, shuffle=True))
    print("train_loss", round(float(trainer.callback_metrics["train_loss"]), 4))
