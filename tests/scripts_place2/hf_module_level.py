"""A Hugging Face Trainer script with no main() and no `if __name__ == "__main__":` guard:
everything at module level, as notebooks exported to scripts are. Read by
tests/e2e/test_framework_place.py (transformers need not be installed)."""

import torch
from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainingArguments

SEQ = 16


class Synthetic(torch.utils.data.Dataset):
    def __init__(self, n):
        self.ids = torch.randint(0, 100, (n, SEQ))
        self.labels = torch.randint(0, 2, (n,))

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "labels": self.labels[i]}


torch.manual_seed(0)
config = BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                    intermediate_size=64, max_position_embeddings=SEQ)
args = TrainingArguments(output_dir="hf_out", max_steps=40, per_device_train_batch_size=8,
                         report_to=[], use_cpu=True, dataloader_num_workers=0)
trainer = Trainer(model=BertForSequenceClassification(config), args=args, train_dataset=Synthetic(320))
trainer.train()
