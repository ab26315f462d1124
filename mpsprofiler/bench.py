"""``mpsprof bench``: how much faster is the accelerator than the CPU on this machine, honestly.

Honest means: warm-up calls first (Metal and CUDA compile kernels on first use), a device
synchronize around every timed region (MPS and CUDA return before the work is done), several
repeats, medians. The verdict: below 1.2x on a 2048 matmul, a slow
training job is bound by data loading or small ops rather than by the GPU's arithmetic.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .devices import backend_for
from .devices.select import accelerator_kind
from .units import console_text, text_console

DEFAULT_SIZES = (1024, 2048, 4096)
QUICK_SIZES = (256, 512, 1024)
DEFAULT_REPEATS = 5
QUICK_REPEATS = 2
VERDICT_SIZE = 2048
VERDICT_SPEEDUP = 1.2
WARMUP_CALLS = 2
MAX_INNER = 200
"""A timed sample repeats a short call up to this many times, so that one sync per sample
does not swamp sub-millisecond kernels."""

Step = Callable[[], Any]


@dataclass
class Workload:
    """One benchmark: ``build(device)`` makes the inputs there and returns the call to time."""

    name: str
    kind: str
    build: Callable[[str], Step]
    size: int | None = None
    flops: float | None = None
    params: int | None = None


def _matmul(n: int) -> Workload:
    def build(device: str) -> Step:
        import torch

        a = torch.randn(n, n, device=device)
        b = torch.randn(n, n, device=device)
        out = torch.empty(n, n, device=device)
        return lambda: torch.mm(a, b, out=out)

    return Workload(f"matmul {n}", "matmul", build, size=n, flops=2.0 * n**3)


def _train_step(model: Any, x: Any, y: Any) -> Step:
    """A full SGD step on fixed synthetic data: forward, loss, backward, update."""
    import torch

    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        out = model(x)
        loss_fn(out.reshape(-1, out.shape[-1]), y.reshape(-1)).backward()
        opt.step()

    return step


def _conv_model() -> Any:
    from torch import nn

    return nn.Sequential(
        nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(),
        nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(64, 64, 3, padding=1), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10),
    )


def _conv(quick: bool) -> Workload:
    batch = 8 if quick else 32

    def build(device: str) -> Step:
        import torch

        torch.manual_seed(0)
        model = _conv_model().to(device)
        x = torch.randn(batch, 3, 32, 32, device=device)
        y = torch.randint(0, 10, (batch,), device=device)
        return _train_step(model, x, y)

    params = sum(p.numel() for p in _conv_model().parameters())
    return Workload(f"conv step (batch {batch})", "conv", build, params=params)


def _transformer_model(vocab: int, d_model: int, layers: int) -> Any:
    """Token embedding, a small encoder and a vocabulary head: a mid-size language model's shape."""
    from torch import nn

    class TinyTransformer(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Embedding(vocab, d_model)
            layer = nn.TransformerEncoderLayer(
                d_model, nhead=4, dim_feedforward=4 * d_model, dropout=0.0, batch_first=True
            )
            self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
            self.head = nn.Linear(d_model, vocab)

        def forward(self, tokens: Any) -> Any:
            return self.head(self.encoder(self.embed(tokens)))

    return TinyTransformer()


def _transformer(quick: bool) -> Workload:
    vocab, d_model, layers = (500, 64, 2) if quick else (1000, 256, 2)
    batch, seq = (8, 32) if quick else (16, 128)

    def build(device: str) -> Step:
        import torch

        torch.manual_seed(0)
        model = _transformer_model(vocab, d_model, layers).to(device)
        tokens = torch.randint(0, vocab, (batch, seq), device=device)
        targets = torch.randint(0, vocab, (batch, seq), device=device)
        return _train_step(model, tokens, targets)

    params = sum(p.numel() for p in _transformer_model(vocab, d_model, layers).parameters())
    name = f"transformer step ({batch}x{seq}, d{d_model})"
    return Workload(name, "transformer", build, params=params)


def workloads(sizes: list[int], quick: bool) -> list[Workload]:
    return [*(_matmul(n) for n in sizes), _conv(quick), _transformer(quick)]


def time_call(fn: Step, sync: Callable[[], None], repeats: int, min_sample_s: float) -> dict[str, Any]:
    """Median seconds per call of ``fn``, after warm-up, with the device synchronised."""

    def timed(calls: int) -> float:
        sync()
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        sync()
        return (time.perf_counter() - start) / calls

    cold = timed(1)
    warm = min(timed(1) for _ in range(WARMUP_CALLS))
    inner = max(1, min(MAX_INNER, math.ceil(min_sample_s / max(warm, 1e-9))))
    samples = [timed(inner) for _ in range(repeats)]
    return {
        "median_ms": round(statistics.median(samples) * 1e3, 4),
        "samples_ms": [round(s * 1e3, 4) for s in samples],
        "cold_ms": round(cold * 1e3, 4),
        "calls_per_sample": inner,
    }


class _Progress:
    """A rich progress bar on a terminal; one plain line per result in a pipe or a log."""

    def __init__(self, total: int, enabled: bool = True) -> None:
        self._total, self._done, self._enabled = total, 0, enabled
        self._bar: Any = None
        if enabled and sys.stderr.isatty():
            from rich.console import Console
            from rich.progress import Progress

            self._bar = Progress(console=Console(stderr=True), transient=True)
            self._task = self._bar.add_task("bench", total=total)
            self._bar.start()

    def step(self, label: str, median_ms: float | None = None) -> None:
        self._done += 1
        if self._bar is not None:
            self._bar.update(self._task, advance=1, description=label)
        elif self._enabled:
            figure = f": {median_ms:.3f} ms" if median_ms is not None else ""
            sys.stderr.write(f"[{self._done}/{self._total}] {label}{figure}\n")
            sys.stderr.flush()

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()


def _measure(work: Workload, device: str, repeats: int, min_sample_s: float) -> dict[str, Any]:
    backend = backend_for(device)
    fn = work.build(device)
    result = time_call(fn, backend.synchronize, repeats, min_sample_s)
    if work.flops:
        result["gflops"] = round(work.flops / (result["median_ms"] * 1e-3) / 1e9, 2)
    del fn
    backend.empty_cache()
    return result


def run_bench(
    sizes: list[int] | None = None,
    repeats: int | None = None,
    quick: bool = False,
    accelerator: str | None | bool = True,
    progress: bool = True,
) -> dict[str, Any]:
    """Run every workload on the CPU and on the accelerator; the JSON-ready result.

    ``accelerator``: True picks one (MPS, then CUDA), False/None measures the CPU only,
    a string names the device type.
    """
    import torch

    from .environment import cpu_brand

    sizes = list(sizes or (QUICK_SIZES if quick else DEFAULT_SIZES))
    repeats = repeats or (QUICK_REPEATS if quick else DEFAULT_REPEATS)
    device = accelerator_kind() if accelerator is True else (accelerator or None)
    devices = ["cpu"] + ([device] if device else [])
    min_sample_s = 0.01 if quick else 0.05
    torch.manual_seed(0)
    work_list = workloads(sizes, quick)
    bar = _Progress(len(work_list) * len(devices), enabled=progress)
    results = []
    try:
        for work in work_list:
            entry: dict[str, Any] = {"name": work.name, "kind": work.kind, "size": work.size,
                                     "params": work.params, "cpu": None, "accelerator": None}
            for dev in devices:
                try:
                    measured = _measure(work, dev, repeats, min_sample_s)
                except Exception as exc:  # one op missing on a device must not lose the rest
                    measured = {"median_ms": None, "error": f"{type(exc).__name__}: {exc}"}
                entry["cpu" if dev == "cpu" else "accelerator"] = measured
                bar.step(f"{work.name} on {dev}", measured["median_ms"])
            entry["speedup"] = _speedup(entry)
            results.append(entry)
    finally:
        bar.close()
    report: dict[str, Any] = {
        "schema": "mpsprof.bench/1",
        "accelerator": device,
        "accelerator_name": backend_for(device).name() if device else None,
        "cpu_name": cpu_brand(),
        "torch": str(torch.__version__),
        "torch_threads": torch.get_num_threads(),
        "quick": quick,
        "repeats": repeats,
        "sizes": sizes,
        "results": results,
    }
    report["verdict"] = interpret(report)
    return report


def _speedup(entry: dict[str, Any]) -> float | None:
    cpu, acc = entry.get("cpu"), entry.get("accelerator")
    if not cpu or not acc or not cpu["median_ms"] or not acc["median_ms"]:
        return None
    speedup: float = cpu["median_ms"] / acc["median_ms"]
    return round(speedup, 3)


def interpret(report: dict[str, Any]) -> list[str]:
    """What the figures mean for a training job, in sentences."""
    results = report["results"]
    if not report.get("accelerator"):
        best = max((r["cpu"].get("gflops", 0) for r in results if r["kind"] == "matmul"), default=0)
        figure = f" (best matmul {best:.0f} GFLOP/s on {report['torch_threads']} thread(s))" if best else ""
        return [f"No accelerator; CPU figures only{figure}."]
    lines = [f"{r['name']} failed on {where}: {r[key]['error']}" for r in results
             for key, where in (("cpu", "the CPU"), ("accelerator", report["accelerator"]))
             if r.get(key) and r[key].get("error")]
    verdict = next((r for r in results if r["kind"] == "matmul" and r["size"] == VERDICT_SIZE), None)
    if verdict is None:
        lines.append(f"No {VERDICT_SIZE} matmul measured: run without --quick for the verdict.")
    elif verdict["speedup"] is None:
        pass  # it failed, said above
    elif verdict["speedup"] < VERDICT_SPEEDUP:
        lines.append(
            f"Only {verdict['speedup']:.2f}x at {VERDICT_SIZE} (below {VERDICT_SPEEDUP}x): the accelerator "
            "barely beats the CPU even on large products, so a slow training job is likely bound by "
            "data loading or small ops. Profile it with `mpsprof run` before tuning the model."
        )
    else:
        lines.append(
            f"{verdict['speedup']:.1f}x at {VERDICT_SIZE}: the accelerator's arithmetic is fast. If "
            "training gains much less, look at data loading, small ops and sync points (`mpsprof run`)."
        )
    for r in results:
        if r["kind"] != "matmul" and r["speedup"] is not None and r["speedup"] < 1.0:
            lines.append(
                f"{r['name']}: the CPU wins ({r['speedup']:.2f}x). With small models ({r['params']:,} "
                "parameters here) per-op launch cost dominates: use larger batches or keep them on the CPU."
            )
    first = results[0]["accelerator"] if results and results[0]["accelerator"] else None
    slow_start = first and first.get("median_ms") and first["cold_ms"] > max(5 * first["median_ms"], 5)
    if slow_start and first is not None:
        lines.append(
            f"The first call took {first['cold_ms']:.0f} ms against {first['median_ms']:.2f} ms warm: "
            "kernels are compiled and libraries loaded on first use. Never judge speed by the first steps."
        )
    return lines


def render_bench(report: dict[str, Any], color: bool | None = None) -> str:
    """The table and verdict for people; plain text in a pipe."""
    from rich.table import Table

    color = sys.stdout.isatty() if color is None else color
    console = text_console(color, 100 if not color else None)
    acc = report["accelerator"]
    threads = report["torch_threads"]
    cpu = f"CPU ({report['cpu_name'] or 'unknown'}, {threads} thread{'s' if threads != 1 else ''})"
    against = f"{acc.upper()} ({report['accelerator_name']})" if acc else "no accelerator"
    console.print(f"mpsprof bench: {cpu} vs {against}, torch {report['torch']}, "
                  f"median of {report['repeats']}", style="bold", markup=False)
    table = Table(box=None, pad_edge=False, padding=(0, 2, 0, 0), header_style="bold")
    headers = ["benchmark", "CPU"] + ([acc.upper(), "speed-up"] if acc else [])
    for header in headers:
        table.add_column(header, justify="left" if header == "benchmark" else "right")
    for r in report["results"]:
        speed = f"{r['speedup']:.2f}x" if r["speedup"] is not None else "-"
        row = [r["name"], _cell(r["cpu"])] + ([_cell(r["accelerator"]), speed] if acc else [])
        table.add_row(*row)
    console.print(table)
    console.print()
    for line in report["verdict"]:
        console.print(f"* {line}", markup=False)
    return console_text(console) + "\n"


def _cell(measured: dict[str, Any] | None) -> str:
    if not measured:
        return "-"
    if measured.get("error"):
        return "error"
    cell = f"{measured['median_ms']:.3f} ms"
    if "gflops" in measured:
        cell += f" ({measured['gflops']:.0f} GFLOP/s)"
    return cell


def _sizes(text: str) -> list[int]:
    try:
        sizes = [int(part) for part in text.replace(" ", "").split(",") if part]
    except ValueError:
        raise argparse.ArgumentTypeError(f"sizes must be integers separated by commas, not {text!r}") from None
    if not sizes or any(n <= 0 for n in sizes):
        raise argparse.ArgumentTypeError("sizes must be positive")
    return sizes


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def add_bench_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quick", action="store_true",
                        help=f"small sizes {'/'.join(map(str, QUICK_SIZES))} and {QUICK_REPEATS} repeats")
    parser.add_argument("--repeats", type=_positive, default=None, metavar="N",
                        help=f"timed samples per benchmark (default {DEFAULT_REPEATS})")
    parser.add_argument("--sizes", type=_sizes, default=None, metavar="N,N,...",
                        help=f"matrix sizes (default {','.join(map(str, DEFAULT_SIZES))})")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")


def main_bench(args: argparse.Namespace) -> int:
    report = run_bench(sizes=getattr(args, "sizes", None), repeats=getattr(args, "repeats", None),
                       quick=bool(getattr(args, "quick", False)))
    if getattr(args, "json", False):
        sys.stdout.write(json.dumps(report, indent=2) + "\n")
    else:
        sys.stdout.write(render_bench(report))
    return 0
