"""HF Trainer: trainer.evaluate() of the untrained model first (100 batches), then 30 steps of
training; a tiny BERT from its config. Prints the Trainer's own count: ``global_step N``."""
import os

import torch
from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainingArguments


class Data(torch.utils.data.Dataset):
    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        self.ids = torch.randint(5, 100, (n, 16), generator=g)
        self.labels = (self.ids[:, 0] > 50).long()

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "labels": self.labels[i]}


def main():
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                     intermediate_size=64, max_position_embeddings=16)
    args = TrainingArguments(output_dir=os.environ.get("OUT_DIR", "hf_out"), max_steps=30,
                             per_device_train_batch_size=16, per_device_eval_batch_size=4,
                             save_strategy="no", report_to=[], disable_tqdm=True, use_cpu=True,
                             logging_strategy="no", seed=0)
    trainer = Trainer(model=BertForSequenceClassification(cfg), args=args,
                      train_dataset=Data(480, 0), eval_dataset=Data(400, 1))
    before = trainer.evaluate()["eval_loss"]
    trainer.train()
    print(f"eval_loss before {before:.3f} global_step {trainer.state.global_step}")


if __name__ == "__main__":
    main()
