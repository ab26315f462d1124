"""A Hugging Face Trainer script whose entry point is train(cfg), called at module level
without a guard; a second TrainingArguments (for evaluation) comes first in the file.
Read by tests/e2e/test_framework_place.py (transformers need not be installed)."""

import json
import sys

import torch
from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainingArguments


class Synthetic(torch.utils.data.Dataset):
    def __init__(self, n):
        self.ids = torch.randint(0, 100, (n, 16))
        self.labels = torch.randint(0, 2, (n,))

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "labels": self.labels[i]}


def evaluation_args(cfg):
    return TrainingArguments(output_dir=cfg["out"], per_device_eval_batch_size=32, report_to=[])


def load_config():
    return json.loads(sys.argv[1]) if len(sys.argv) > 1 else {"out": "hf_out", "steps": 40}


def train(cfg):
    model = BertForSequenceClassification(BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2,
                                                     num_attention_heads=2, intermediate_size=64))
    args = TrainingArguments(
        output_dir=cfg["out"],
        max_steps=cfg["steps"],
        per_device_train_batch_size=8,
        report_to=[],
    )
    trainer = Trainer(model=model, args=args, train_dataset=Synthetic(8 * cfg["steps"]))
    trainer.train()
    return trainer.evaluate(Synthetic(64))


train(load_config())
