"""Tiny synthetic data sets and command lines for the corpus scripts (tests/corpus/README.md).

``prepare(work)`` writes, under ``work``, what each script reads from its working directory
(the originals download or ship these): wikitext-like text files, nanoGPT's ``train.bin``,
``val.bin`` and ``meta.pkl``, makemore's ``names.txt``; ``commands(work)`` gives each script's
command line, working directory, extra ``PYTHONPATH`` and expected optimizer step count.
Used by tests/e2e/test_corpus.py and by hand for repeated runs.
"""

from __future__ import annotations

import pickle
import random
import shutil
from dataclasses import dataclass
from pathlib import Path

CORPUS = Path(__file__).resolve().parent

_SYLLABLES = ("an", "el", "ka", "mi", "or", "sa", "ti", "lu", "ra", "ne", "jo", "be", "di", "fa", "ha")


def _words(rng: random.Random, n: int) -> list[str]:
    return ["".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(1, 3))) for _ in range(n)]


def prepare(work: Path) -> None:
    """Write every data file the scripts read, deterministically (seeded)."""
    rng = random.Random(27)
    wlm = work / "wlm_data"
    wlm.mkdir(parents=True, exist_ok=True)
    vocab = _words(rng, 150)
    for name, lines in (("train.txt", 200), ("valid.txt", 40), ("test.txt", 40)):
        text = "\n".join(" ".join(rng.choice(vocab) for _ in range(9)) for _ in range(lines))
        (wlm / name).write_text(text + "\n", encoding="utf8")
    nano = work / "nanoGPT"
    if not nano.exists():
        shutil.copytree(CORPUS / "nanoGPT", nano, ignore=shutil.ignore_patterns("__pycache__"))
    import numpy as np

    data = nano / "data" / "tiny"
    data.mkdir(parents=True, exist_ok=True)
    tokens = np.random.default_rng(27).integers(0, 65, size=20_000, dtype=np.uint16)
    tokens[:18_000].tofile(data / "train.bin")
    tokens[18_000:].tofile(data / "val.bin")
    with open(data / "meta.pkl", "wb") as f:
        pickle.dump({"vocab_size": 65}, f)
    (work / "names.txt").write_text("\n".join(_words(rng, 600)) + "\n", encoding="utf8")


@dataclass(frozen=True)
class Script:
    name: str
    args: tuple[str, ...]
    cwd: Path
    steps: int
    pythonpath: str | None = None


def commands(work: Path, compile_nanogpt: bool = False, nanogpt_iters: int = 12, adder_digits: int = 1) -> dict[str, Script]:
    """Each corpus script on tiny settings: a few seconds of CPU each. ``adder_digits=1``: the
    adder's evaluation at iteration 0 covers 100 problems, not 10,000 (2 digits, as the
    original's default: the repeated runs of issue 27 use that)."""
    nano = (
        "--device=cpu", f"--compile={compile_nanogpt}", "--dtype=float32", "--dataset=tiny", "--eval_interval=6",
        "--eval_iters=2", "--log_interval=1", "--block_size=32", "--batch_size=4", "--n_layer=2", "--n_head=2",
        "--n_embd=32", f"--max_iters={nanogpt_iters}", f"--lr_decay_iters={nanogpt_iters}", "--warmup_iters=2",
        "--gradient_accumulation_steps=1", "--out_dir=out",
    )
    return {
        "mnist": Script("mnist", (
            str(CORPUS / "mnist" / "main.py"), "--epochs", "2", "--train-size", "96", "--test-size", "50", "--batch-size", "16",
            "--test-batch-size", "50", "--log-interval", "5", "--save-model"), work, 12),
        "word_language_model": Script("word_language_model", (
            str(CORPUS / "word_language_model" / "main.py"), "--data", "wlm_data", "--epochs", "2", "--emsize", "32",
            "--nhid", "32", "--bptt", "10", "--batch_size", "10", "--log-interval", "5", "--save", "wlm.pt"),
            work, 40),
        "nanoGPT": Script("nanoGPT", (str(work / "nanoGPT" / "train.py"), *nano), work / "nanoGPT",
                          nanogpt_iters + 1),
        "minGPT_adder": Script("minGPT_adder", (
            str(CORPUS / "minGPT" / "projects" / "adder" / "adder.py"), "--trainer.max_iters=30",
            "--trainer.num_workers=0", f"--data.ndigit={adder_digits}", "--system.work_dir=out/adder"), work, 30,
            str(CORPUS / "minGPT")),
        "makemore": Script("makemore", (
            str(CORPUS / "makemore" / "makemore.py"), "-i", "names.txt", "-o", "out/makemore", "--max-steps", "30",
            "--num-workers", "0", "--n-layer", "2", "--n-embd", "32", "--n-embd2", "32", "--eval-interval", "20",
            "--sample-interval", "25"), work, 30),
    }
