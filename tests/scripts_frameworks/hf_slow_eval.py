"""A Hugging Face Trainer whose evaluation set is slow: evaluation every 10 steps.

A tiny BERT built from its config (random weights, no download), synthetic data. The
evaluation dataset's ``__getitem__`` sleeps 4 ms a sample (a batch of 32: about 130 ms),
and ``eval_strategy="steps"`` evaluates 10 batches every 10 optimizer steps: as many
evaluation batches as training ones, so batch counts alone do not tell the loaders apart.
The Trainer builds its evaluation loader anew at each ``evaluate()``.

Env: STEPS (optimizer steps, default 40), WORKERS (dataloader_num_workers, default 0).
Prints the Trainer's own count: ``global_step N``.
"""

import os
import time

import torch
from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainingArguments

STEPS = int(os.environ.get("STEPS", "40"))
WORKERS = int(os.environ.get("WORKERS", "0"))
SEQ = 16


class Synthetic(torch.utils.data.Dataset):
    def __init__(self, n, sleep=0.0):
        g = torch.Generator().manual_seed(0)
        self.ids = torch.randint(0, 100, (n, SEQ), generator=g)
        self.labels = torch.randint(0, 2, (n,), generator=g)
        self.sleep = sleep

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, i):
        if self.sleep:
            time.sleep(self.sleep)
        return {"input_ids": self.ids[i], "labels": self.labels[i]}


def main():
    torch.manual_seed(0)
    config = BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=SEQ)
    model = BertForSequenceClassification(config)
    args = TrainingArguments(
        output_dir=os.environ.get("OUT_DIR", "hf_out"), max_steps=STEPS, per_device_train_batch_size=8,
        per_device_eval_batch_size=32, learning_rate=1e-3, logging_steps=10, save_strategy="no",
        report_to=[], disable_tqdm=True, use_cpu=True, dataloader_num_workers=WORKERS,
        eval_strategy="steps", eval_steps=10,
    )
    trainer = Trainer(model=model, args=args, train_dataset=Synthetic(8 * STEPS),
                      eval_dataset=Synthetic(320, sleep=0.004))
    trainer.train()
    print(f"global_step {trainer.state.global_step}", flush=True)


if __name__ == "__main__":
    main()
