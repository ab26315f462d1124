"""A Hugging Face Trainer by MODE: a tiny GPT-2 causal LM from its config (random weights, no download).
MODE: clean | slowload | slowcollate | leak | leak_eval (leak, and evaluation every 10 steps of 2 batches
of 32 keeps its logits too) | accum_eval | compile | eval_only (Trainer.evaluate() alone, no training, over 40
batches of 8 through the slow collator) (default clean); STEPS. Prints the framework's own step count last.
"""
import os
import time

import torch
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments

MODE = os.environ.get("MODE", "clean")
STEPS = int(os.environ.get("STEPS", "30"))
WORKERS = int(os.environ.get("WORKERS", "0"))
SEQ = 24


class Tokens(torch.utils.data.Dataset):
    def __init__(self, n, slow=False):
        g = torch.Generator().manual_seed(2)
        self.ids = torch.randint(0, 200, (n, SEQ), generator=g)
        self.slow = slow

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, i):
        if self.slow:
            time.sleep(0.005)
        return {"input_ids": self.ids[i], "attention_mask": torch.ones(SEQ, dtype=torch.long)}


class LmCollator:
    def __init__(self, slow):
        self.slow = slow

    def __call__(self, features):
        if self.slow:
            time.sleep(0.04)
        ids = torch.stack([f["input_ids"] for f in features])
        return {"input_ids": ids, "attention_mask": torch.stack([f["attention_mask"] for f in features]),
                "labels": ids.clone()}


class KeepingTrainer(Trainer):
    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        self.outs = []

    def compute_loss(self, model, inputs, return_outputs=False, **kwargs):
        outputs = model(**inputs)
        self.outs.append(outputs.logits)
        return (outputs.loss, outputs) if return_outputs else outputs.loss


def main():
    torch.manual_seed(0)
    config = GPT2Config(vocab_size=200, n_positions=SEQ, n_embd=48, n_layer=2, n_head=2)
    model = GPT2LMHeadModel(config)
    accum = 3 if MODE == "accum_eval" else 1
    args = TrainingArguments(
        output_dir=os.environ.get("OUT_DIR", "trainer_modes_out"), max_steps=STEPS,
        per_device_train_batch_size=8, per_device_eval_batch_size=32 if MODE == "leak_eval" else 8,
        gradient_accumulation_steps=accum, learning_rate=5e-4, logging_steps=5,
        save_strategy="no", report_to=[], disable_tqdm=True, use_cpu=True,
        dataloader_num_workers=WORKERS,
        eval_strategy="steps" if MODE in ("accum_eval", "leak_eval") else "no", eval_steps=10,
        torch_compile=MODE == "compile",
    )
    cls = KeepingTrainer if MODE in ("leak", "leak_eval") else Trainer
    trainer = cls(model=model, args=args, train_dataset=Tokens(8 * STEPS * accum + 64, MODE == "slowload"),
                  eval_dataset=Tokens(64 if MODE == "leak_eval" else 24), data_collator=LmCollator(MODE in ("slowcollate", "eval_only")))
    if MODE == "eval_only":  # a checkpoint's evaluation: no optimizer ever steps
        print("eval", round(trainer.evaluate(Tokens(320))["eval_loss"], 4))
        print(f"global_step {trainer.state.global_step}", flush=True)
        return
    trainer.train()
    if MODE == "accum_eval":
        print("eval", trainer.evaluate()["eval_loss"])
    print(f"global_step {trainer.state.global_step}", flush=True)


if __name__ == "__main__":
    main()
