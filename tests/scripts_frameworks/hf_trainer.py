"""A Hugging Face Trainer on a tiny BERT built from its config (random weights, no download).

Env: STEPS (optimizer steps, default 40), ACCUM (gradient_accumulation_steps, default 1),
COLLATE_SLEEP (seconds per batch in a slow data_collator, default 0), EVAL (1: eval each 10 steps),
EPOCHS (passes over the training set that the STEPS make, default 1: the set holds STEPS / EPOCHS updates).
Prints the Trainer's own count: ``global_step N``.
"""

import os
import time

import torch
from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainingArguments

STEPS = int(os.environ.get("STEPS", "40"))
ACCUM = int(os.environ.get("ACCUM", "1"))
SLEEP = float(os.environ.get("COLLATE_SLEEP", "0"))
EVAL = os.environ.get("EVAL") == "1"
EPOCHS = int(os.environ.get("EPOCHS", "1"))
TRAIN_SIZE = int(os.environ.get("TRAIN_SIZE", "0"))  # samples; 0: STEPS x ACCUM batches over EPOCHS
SEQ = 16


class Synthetic(torch.utils.data.Dataset):
    def __init__(self, n):
        g = torch.Generator().manual_seed(0)
        self.ids = torch.randint(0, 100, (n, SEQ), generator=g)
        self.labels = torch.randint(0, 2, (n,), generator=g)

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "labels": self.labels[i]}


def collate(samples):
    if SLEEP:
        time.sleep(SLEEP)
    return {"input_ids": torch.stack([s["input_ids"] for s in samples]),
            "labels": torch.stack([s["labels"] for s in samples])}


def main():
    torch.manual_seed(0)
    config = BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=SEQ)
    model = BertForSequenceClassification(config)
    args = TrainingArguments(
        output_dir=os.environ.get("OUT_DIR", "hf_out"), max_steps=STEPS, per_device_train_batch_size=8,
        gradient_accumulation_steps=ACCUM, learning_rate=1e-3, logging_steps=10, save_strategy="no",
        report_to=[], disable_tqdm=True, use_cpu=True, dataloader_num_workers=0,
        eval_strategy="steps" if EVAL else "no", eval_steps=10,
    )
    trainer = Trainer(model=model, args=args, train_dataset=Synthetic(TRAIN_SIZE or 8 * STEPS * ACCUM // EPOCHS),
                      eval_dataset=Synthetic(32) if EVAL else None, data_collator=collate)
    trainer.train()
    print(f"global_step {trainer.state.global_step}", flush=True)


if __name__ == "__main__":
    main()
