"""Benchmark workloads: a training loop that reports its own loop time.

Run bare (``python workload.py``), under ``mpsprof run --headless``, or with
``--torch-profiler`` (torch.profiler with CPU (+CUDA) activities and profile_memory, no
schedule: how people usually reach for it). The loop time excludes interpreter start
and imports, so ratios compare what the profilers add to the training itself.

Models:
* ``mlp``: an MLP on CPU-sized matmuls, ``--width`` sets the step time (~1 ms / ~5 ms);
* ``cnn``: a ResNet-style CNN, GPU-bound on CUDA (~10 ms steps at batch 256);
* ``transformer``: a small transformer at batch 8, host-bound: many small kernels;
* ``gpt``: nanoGPT's shakespeare-char model (6 layers, 6 heads, 384 wide, 256 tokens,
  batch 64, vocab 65, AdamW, causal ``scaled_dot_product_attention``) on random tokens:
  ~30 ms steps on an H200 in float32; ``--bf16`` runs it as nanoGPT's own config does
  (bf16 autocast, TF32 matmuls): ~8 ms steps without ``torch.compile``.

On CUDA the DataLoader pins its batches (``pin_memory=True``), so ``non_blocking`` copies
let the host run ahead of the GPU as tuned CUDA scripts do. ``--pageable`` turns that off:
a copy from pageable memory waits for the GPU's queued work, so every step the GPU idles
while the host fetches the next batch, and any host-side cost of a profiler shows in the
step time even on a GPU-bound model.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import barrier  # beside this file (the script's folder is on sys.path)
import callgrind_window  # (the loop as callgrind's window, for loop_instructions.py; else nothing)
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Block(nn.Module):
    def __init__(self, c: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(c)
        self.conv2 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(c)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(x + self.bn2(self.conv2(y)))


class CausalBlock(nn.Module):
    """nanoGPT's Block: pre-LayerNorm causal self-attention and a 4x GELU MLP."""

    def __init__(self, d: int, heads: int, dropout: float) -> None:
        super().__init__()
        self.heads, self.dropout = heads, dropout
        self.ln_1, self.ln_2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.c_attn, self.c_proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d), nn.Dropout(dropout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        y = nn.functional.scaled_dot_product_attention(q, k, v, dropout_p=self.dropout if self.training else 0.0,
                                                       is_causal=True)  # fmt: skip
        x = x + self.c_proj(y.transpose(1, 2).contiguous().view(b, t, c))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, vocab: int = 65, block: int = 256, d: int = 384, layers: int = 6, heads: int = 6,
                 dropout: float = 0.2) -> None:  # fmt: skip
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(block, d)
        self.drop = nn.Dropout(dropout)
        self.h = nn.ModuleList(CausalBlock(d, heads, dropout) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d)
        self.lm_head = nn.Linear(d, vocab, bias=False)
        self.wte.weight = self.lm_head.weight  # weight tying, as nanoGPT

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(idx.shape[1], device=idx.device)
        x = self.drop(self.wte(idx) + self.wpe(pos))
        for block in self.h:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        return logits.view(-1, logits.shape[-1])


def make(model: str, width: int, device: torch.device) -> tuple[nn.Module, TensorDataset, int]:
    g = torch.Generator().manual_seed(0)
    if model == "mlp":
        net = nn.Sequential(nn.Linear(width, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(), nn.Linear(width, 10))
        data = TensorDataset(torch.randn(4096, width, generator=g), torch.randint(0, 10, (4096,), generator=g))
        return net.to(device), data, 64
    if model == "cnn":
        net = nn.Sequential(
            nn.Conv2d(3, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(),
            *[Block(64) for _ in range(4)], nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10),
        )
        data = TensorDataset(torch.randn(2048, 3, 32, 32, generator=g), torch.randint(0, 10, (2048,), generator=g))
        return net.to(device), data, 256
    if model == "transformer":
        layer = nn.TransformerEncoderLayer(d_model=128, nhead=4, dim_feedforward=256, batch_first=True)
        net = nn.Sequential(nn.TransformerEncoder(layer, num_layers=6, enable_nested_tensor=False), nn.Flatten(), nn.Linear(128 * 32, 10))
        data = TensorDataset(torch.randn(1024, 32, 128, generator=g), torch.randint(0, 10, (1024,), generator=g))
        return net.to(device), data, 8
    if model == "gpt":
        tokens = torch.randint(0, 65, (512, 257), generator=g)
        data = TensorDataset(tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous())
        return GPT().to(device), data, 64
    raise SystemExit(f"unknown model {model}")


def training_step(model: str, width: int, device: torch.device, bf16: bool = False,
                  pageable: bool = False) -> Callable[[], None]:
    """One training step of ``model`` per call, the loop this file and ``fw_step_cost.py`` time:
    the next batch (an endless DataLoader), its copy to ``device``, forward, backward and the
    optimizer (nanoGPT's fused AdamW for ``gpt``, SGD otherwise); ``bf16`` as nanoGPT trains."""
    net, data, batch = make(model, width, device)
    if model == "gpt":
        opt: torch.optim.Optimizer = torch.optim.AdamW(net.parameters(), lr=1e-3, betas=(0.9, 0.99),
                                                       fused=device.type == "cuda")  # fmt: skip
    else:
        opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    pin = device.type == "cuda" and not pageable
    loader = DataLoader(data, batch_size=batch, shuffle=True, drop_last=True, pin_memory=pin)

    def batches() -> Iterator[Any]:
        while True:
            yield from loader

    it = batches()
    amp = bf16 and device.type == "cuda"
    if amp:
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True

    def step() -> None:
        x, y = next(it)
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=amp):
            loss = loss_fn(net(x), y.reshape(-1))
        loss.backward()
        opt.step()

    return step


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="mlp", choices=["mlp", "cnn", "transformer", "gpt"])
    p.add_argument("--width", type=int, default=512)
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--device", default="cpu")
    p.add_argument("--torch-profiler", action="store_true")
    p.add_argument("--pageable", action="store_true", help="CUDA: do not pin batches (see the docstring)")
    p.add_argument("--bf16", action="store_true", help="CUDA: bf16 autocast and TF32 matmuls, as nanoGPT trains")
    args = p.parse_args()
    torch.manual_seed(0)
    device = torch.device(args.device)
    step = training_step(args.model, args.width, device, bf16=args.bf16, pageable=args.pageable)

    def sync() -> None:  # written out, not mpsprofiler's backend: the bare run imports no mpsprofiler
        if device.type == "cuda":
            torch.cuda.synchronize()
        elif device.type == "mps":
            torch.mps.synchronize()

    barrier.wait()  # overhead.py --concurrent: the runs of a round start their steps together
    for _ in range(args.warmup):
        step()
    sync()
    ctx = contextlib.nullcontext()
    if args.torch_profiler:
        from torch.profiler import ProfilerActivity, profile

        acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
        ctx = profile(activities=acts, profile_memory=True)
    with ctx:
        callgrind_window.start()
        t0, c0 = time.perf_counter(), time.process_time()
        for _ in range(args.steps):
            step()
        sync()
        loop, cpu = time.perf_counter() - t0, time.process_time() - c0
        callgrind_window.stop()
    # cpu_s: CPU seconds of this process over the loop, all its threads (the probe's too):
    # on a shared host far steadier than the loop's wall time (see overhead.py)
    print("BENCH " + json.dumps({"loop_s": loop, "step_ms": loop / args.steps * 1e3, "cpu_s": cpu}), flush=True)


if __name__ == "__main__":
    main()
