"""A first training step that raises (labels of the wrong shape for the loss), under the
framework FRAMEWORK: trainer (gradient_accumulation_steps=2: 2 batches and accelerate's
look-ahead fetched before the forward) | lightning (a validation loader: 2 sanity-check
batches first) | accelerate (a prepared loader: its one-batch look-ahead)."""

import os

import torch

FRAMEWORK = os.environ.get("FRAMEWORK", "trainer")


class Pairs(torch.utils.data.Dataset):
    def __len__(self):
        return 64

    def __getitem__(self, i):
        return {"x": torch.randn(10), "labels": torch.randn(3)}  # the model makes 4 values


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(10, 4)

    def forward(self, x, labels=None):
        out = self.fc(x)
        return {"loss": torch.nn.functional.mse_loss(out, labels), "logits": out}


def trainer():
    from transformers import Trainer, TrainingArguments

    args = TrainingArguments(os.environ.get("OUT_DIR", "crash_out"), max_steps=5, per_device_train_batch_size=8,
                             gradient_accumulation_steps=2, report_to="none", use_cpu=True, disable_tqdm=True,
                             save_strategy="no", remove_unused_columns=False)
    Trainer(model=Model(), args=args, train_dataset=Pairs()).train()


def lightning():
    import lightning as L

    class Module(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.model = Model()

        def training_step(self, batch, batch_idx):
            return self.model(**batch)["loss"]

        def validation_step(self, batch, batch_idx):
            self.log("val", self.model.fc(batch["x"]).sum())

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    loader = torch.utils.data.DataLoader(Pairs(), batch_size=8)
    L.Trainer(max_epochs=1, accelerator="cpu", logger=False, enable_checkpointing=False, enable_progress_bar=False,
              enable_model_summary=False).fit(Module(), loader, torch.utils.data.DataLoader(Pairs(), batch_size=8))


def accelerate():
    from accelerate import Accelerator

    acc = Accelerator(cpu=True)
    model = Model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model, optimizer, loader = acc.prepare(model, optimizer, torch.utils.data.DataLoader(Pairs(), batch_size=8))
    for batch in loader:
        acc.backward(model(**batch)["loss"])
        optimizer.step()
        optimizer.zero_grad()


if __name__ == "__main__":
    {"trainer": trainer, "lightning": lightning, "accelerate": accelerate}[FRAMEWORK]()
