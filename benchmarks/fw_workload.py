"""Framework benchmark workloads: a Hugging Face Trainer and a Lightning loop that report
their own loop time (``BENCH {"loop_s": ..., "step_ms": ...}``, like ``workload.py``).

Tiny models built from configs (random weights, no download), synthetic data, CPU. The
loop time runs from the end of optimizer step ``--warmup`` to the end of the last step,
read by the framework's own callback, so interpreter start, imports and the framework's
setup are left out and what is compared is what a profiler adds to the training steps.

    python benchmarks/fw_workload.py --framework hf --steps 200
    python benchmarks/fw_workload.py --framework lightning --steps 400
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from collections.abc import Callable

import barrier  # beside this file (the script's folder is on sys.path)
import callgrind_window  # (the loop as callgrind's window, for loop_instructions.py; else nothing)
import torch


class _Clock:
    def __init__(self, warmup: int, last: int) -> None:
        self.warmup = warmup
        self.last = last
        self.t0: float | None = None
        self.t1 = 0.0
        self.c0 = self.c1 = 0.0
        self.steps = 0

    def step_end(self, global_step: int) -> None:
        now, cpu = time.perf_counter(), time.process_time()
        if global_step == self.warmup:
            self.t0, self.c0 = now, cpu
            callgrind_window.start()
        elif self.t0 is not None:
            self.t1, self.c1, self.steps = now, cpu, global_step - self.warmup
            if global_step == self.last:
                callgrind_window.stop()


def hf(steps: int, step_end: Callable[[int], None]) -> None:
    """A tiny BERT classifier under ``transformers.Trainer``; ``step_end(global_step)`` after each step."""
    from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainerCallback, TrainingArguments

    seq = 32

    class Synthetic(torch.utils.data.Dataset):  # type: ignore[type-arg]
        def __init__(self, n: int) -> None:
            g = torch.Generator().manual_seed(0)
            self.ids = torch.randint(0, 1000, (n, seq), generator=g)
            self.labels = torch.randint(0, 2, (n,), generator=g)

        def __len__(self) -> int:
            return len(self.ids)

        def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
            return {"input_ids": self.ids[i], "labels": self.labels[i]}

    class Timer(TrainerCallback):  # type: ignore[misc]
        def on_train_begin(self, args, state, control, **kwargs):  # type: ignore[no-untyped-def]
            barrier.wait()  # overhead.py --concurrent: the runs of a round start their steps together

        def on_step_end(self, args, state, control, **kwargs):  # type: ignore[no-untyped-def]
            step_end(state.global_step)

    config = BertConfig(vocab_size=1000, hidden_size=128, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=256, max_position_embeddings=seq)  # fmt: skip
    model = BertForSequenceClassification(config)
    with tempfile.TemporaryDirectory() as out:
        args = TrainingArguments(
            output_dir=out, max_steps=steps, per_device_train_batch_size=16, learning_rate=1e-3,
            logging_steps=50, save_strategy="no", report_to=[], disable_tqdm=True, use_cpu=True,
            dataloader_num_workers=0,
        )  # fmt: skip
        trainer = Trainer(model=model, args=args, train_dataset=Synthetic(16 * steps), callbacks=[Timer()])
        trainer.train()


def lightning(steps: int, step_end: Callable[[int], None]) -> None:
    """A 3-layer MLP under ``lightning.Trainer`` with ``self.log``; ``step_end(global_step)`` after each step."""
    import lightning as L

    class Model(L.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.net = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512),
                                           torch.nn.ReLU(), torch.nn.Linear(512, 10))  # fmt: skip

        def training_step(self, batch, batch_idx):  # type: ignore[no-untyped-def]
            x, y = batch
            loss = torch.nn.functional.cross_entropy(self.net(x), y)
            self.log("loss", loss)
            return loss

        def configure_optimizers(self):  # type: ignore[no-untyped-def]
            return torch.optim.AdamW(self.parameters(), lr=1e-3)

    class Timer(L.Callback):
        def on_train_start(self, trainer, pl_module):  # type: ignore[no-untyped-def]
            barrier.wait()  # overhead.py --concurrent: the runs of a round start their steps together

        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):  # type: ignore[no-untyped-def]
            step_end(trainer.global_step)

    g = torch.Generator().manual_seed(0)
    data = torch.utils.data.TensorDataset(torch.randn(64 * steps, 256, generator=g),
                                          torch.randint(0, 10, (64 * steps,), generator=g))  # fmt: skip
    trainer = L.Trainer(max_steps=steps, accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, log_every_n_steps=50,
                        callbacks=[Timer()])  # fmt: skip
    trainer.fit(Model(), torch.utils.data.DataLoader(data, batch_size=64))


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--framework", choices=["hf", "lightning"], required=True)
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--torch-profiler", action="store_true")
    args = p.parse_args()
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    torch.manual_seed(0)
    clock = _Clock(args.warmup, args.steps)
    run = hf if args.framework == "hf" else lightning
    if args.torch_profiler:
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CPU], profile_memory=True):
            run(args.steps, clock.step_end)
    else:
        run(args.steps, clock.step_end)
    loop = clock.t1 - (clock.t0 or clock.t1)
    print("BENCH " + json.dumps({"loop_s": loop, "step_ms": loop / max(1, clock.steps) * 1e3,
                                 "cpu_s": clock.c1 - clock.c0}), flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
