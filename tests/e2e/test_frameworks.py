"""The frameworks people train with: Lightning, the Hugging Face Trainer and accelerate.

Steps are counted as the framework counts them (its optimizer steps, not the batches its
loaders fetch ahead, nor Lightning's sanity check). The tracker's rules are pinned down
on scripted calls first (no library needed); the real libraries, where installed (the
``frameworks`` extra), run tiny models built from configs (random weights, synthetic
data, no download) through the real CLI, a few runs shared by the tests.
"""

from __future__ import annotations

import ast
import importlib.util
import re
import subprocess
import textwrap
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from helpers import child_env, fix_code, line_of, mpsprof_cli, read_events, read_summary
from mpsprofiler.devices.cpu import CpuBackend
from mpsprofiler.events.step_rows import as_read
from mpsprofiler.probe.steps import PROVISIONAL, StepTracker

SCRIPTS = Path(__file__).parent.parent / "scripts_frameworks"
OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
           "TOKENIZERS_PARALLELISM": "false"}
"""No download, ever: the models are built from configs with random weights."""


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def tracker() -> tuple[StepTracker, Clock, list[dict[str, Any]]]:
    clock = Clock()
    sent: list[dict[str, Any]] = []
    return StepTracker(lambda kind, **payload: sent.append(as_read(payload)), CpuBackend(), clock), clock, sent


def fetch(t: StepTracker, clock: Clock, wait: float = 0.01, got: bool = True) -> None:
    started = t.on_fetch_start()
    clock.t += wait
    t.on_fetch_end(started, got)


class Opt:
    """An optimizer as the step hook sees it: its parameter groups."""

    def __init__(self, *params: object) -> None:
        self.param_groups = [{"params": list(params)}]


def steps_of(sent: list[dict[str, Any]]) -> list[int]:
    return [i for payload in sent for i in payload["i"]]


def test_batches_fetched_ahead_of_the_first_step_are_not_steps() -> None:
    """accelerate's look-ahead, a Trainer's accumulation window (4 batches fetched
    before the first forward) and the DataLoaderShard's one-ahead: 5 fetches before the
    first backward pass; 10 optimizer steps are 10 steps, and the held batches' wait
    stays in step 0."""
    t, clock, sent = tracker()
    listened: list[int] = []
    t.listeners.append(lambda i, dur: listened.append(i))
    w = Opt(object())
    for _ in range(5):
        fetch(t, clock)
    t.drain()
    assert sent == []  # held: not yet known to be steps
    assert listened == []
    for step in range(10):
        if step:
            for _ in range(4):
                fetch(t, clock)
        clock.t += 0.01
        t.on_backward("site", clock.t)
        t.on_optimizer_step(w)
    t.finish()
    t.drain()
    assert steps_of(sent) == list(range(10))
    assert t.retracted == 4
    assert abs(sent[0]["wait"][0] - 0.05) < 1e-9 and sent[0]["batches"][0] == 5
    assert listened == list(range(1, 11))


def test_sanity_check_batches_then_training() -> None:
    """Lightning's 2 sanity-check validation batches (fetch, forward, fetch, forward,
    end of loader), then training with an optimizer step per batch."""
    t, clock, sent = tracker()
    w = Opt(object())
    fetch(t, clock)
    fetch(t, clock)
    fetch(t, clock, got=False)
    for _ in range(6):
        fetch(t, clock)
        t.on_backward("site", clock.t)
        t.on_optimizer_step(w)
    t.finish()
    t.drain()
    assert len(steps_of(sent)) == 6


def test_a_loop_without_training_still_counts_its_batches() -> None:
    """Inference: every batch after the first is a step; past PROVISIONAL they are sent
    as they come, and the listeners (the op sampler, --max-steps) hear of them."""
    t, clock, sent = tracker()
    listened: list[int] = []
    t.listeners.append(lambda i, dur: listened.append(i))
    for _ in range(PROVISIONAL + 10):
        fetch(t, clock)
    t.drain()
    assert len(steps_of(sent)) == PROVISIONAL + 9
    assert listened[0] == PROVISIONAL and listened[-1] == PROVISIONAL + 9
    t2, clock2, sent2 = tracker()
    for _ in range(4):
        fetch(t2, clock2)
    t2.finish()
    t2.drain()
    assert steps_of(sent2) == [0, 1, 2] and t2.mode == "dataloader"


def test_a_validation_pass_longer_than_the_hold_before_training_is_no_steps() -> None:
    """The untrained model's validation over more batches than are held (``PROVISIONAL``),
    then training: the validation's steps were sent as a loop without training's, and
    stayed steps (188 of 100 in a real script). The probe says ``restart`` with the next
    steps, numbers the training from 0 and counts the validation's batches as fetched
    ahead; the session's figures start again: the training's steps only."""
    from mpsprofiler.session.session import Session

    t, clock, sent = tracker()
    listened: list[int] = []
    t.listeners.append(lambda i, dur: listened.append(i))
    for _ in range(PROVISIONAL + 20):
        fetch(t, clock)
    fetch(t, clock, got=False)  # the validation loader's end
    t.drain()  # its steps are sent as they come
    assert len(steps_of(sent)) == PROVISIONAL + 20 and listened[-1] == PROVISIONAL + 20
    w = Opt(object())
    for step in range(12):
        fetch(t, clock)
        clock.t += 0.01
        t.on_backward("site", clock.t)
        t.on_optimizer_step(w)
        if step == 5:
            t.drain()
    t.finish()
    t.drain()
    restarts = [k for k, payload in enumerate(sent) if payload.get("restart")]
    assert len(restarts) == 1, sent
    assert steps_of(sent[restarts[0]:]) == list(range(12))
    assert t.retracted == PROVISIONAL + 20 and t.mode == "optimizer"
    session = Session(read_back=True)
    for payload in sent:
        session._on_steps(0.0, payload)
    assert session.steps.count == 12 and session.steps.mode == "optimizer"
    assert session.steps.early[0].i == 0 and session.steps.total_batches == 12


def test_an_optimizer_built_every_step_is_one_optimizer() -> None:
    """A new SGD each iteration over the same parameters (CPython reuses the freed one's
    address, so ids alternate or repeat): each step() is a step; a GAN's two optimizers
    over different parameters are still one step together."""
    t, clock, sent = tracker()
    param = object()
    for _ in range(12):
        clock.t += 0.01
        t.on_optimizer_step(Opt(param))
    t.finish()
    t.drain()
    assert len(steps_of(sent)) == 12
    t2, clock2, sent2 = tracker()
    g, d = object(), object()
    for _ in range(6):
        clock2.t += 0.01
        t2.on_optimizer_step(Opt(d))
        t2.on_optimizer_step(Opt(g))
    t2.finish()
    t2.drain()
    assert len(steps_of(sent2)) == 6


def test_loader_fix_in_each_frameworks_terms() -> None:
    """Where each framework's user changes the loader (no library needed)."""
    from mpsprofiler.diagnosis.analyzers.framework import loader_fix

    trainer = loader_fix("transformers Trainer", 3, 4, "cuda", 8)
    assert "`dataloader_pin_memory=True`" in trainer and "TrainingArguments" in trainer
    assert "`dataloader_prefetch_factor=4`" in trainer and "data_collator" in trainer
    lightning = loader_fix("lightning", 2, 4, "mps", 16)
    assert "def train_dataloader(self):" in lightning and "batch_size=16, shuffle=True, num_workers=2" in lightning
    assert "```" not in loader_fix("lightning", 2, 4, "mps", 16, rewritten=True)
    accelerate = loader_fix("accelerate", 2, 4, "cpu", None)
    assert "accelerator.prepare(loader)" in accelerate and "before `prepare`" in accelerate
    # an evaluation loader (read in a few steps only): the hooks that build it
    val = loader_fix("lightning", 4, 4, "mps", 16, side=True)
    assert "def val_dataloader(self):" in val and "shuffle" not in val and "train_dataloader" not in val
    assert "`Trainer.get_eval_dataloader`, for evaluation" in loader_fix("transformers Trainer", 3, 4, "cpu", 8, side=True)


def test_lightnings_loader_snippet_keeps_workers_only_for_a_loader_read_again() -> None:
    """The snippet for a ``train_dataloader()`` the probe could not read back: without
    ``persistent_workers=True`` for a loader read in one pass (the analyzer's ``loader_keeps``
    ``single``), with it otherwise (no library needed)."""
    from mpsprofiler.diagnosis.analyzers.framework import loader_fix

    assert "persistent_workers=True" in loader_fix("lightning", 2, 4, "mps", 16)
    once = loader_fix("lightning", 2, 4, "mps", 16, persistent=False)
    assert "num_workers=2," in once and "prefetch_factor=4" in once and "persistent_workers" not in once, once


def test_a_trainers_loader_fix_rewrites_its_training_arguments(tmp_path: Path) -> None:
    """The probe names the script's `trainer.train()` line for a Trainer's loader (the
    frameworks' frames are skipped); the fix is the script's TrainingArguments call with
    dataloader_num_workers changed, its other arguments as written."""
    from types import SimpleNamespace

    from mpsprofiler.diagnosis.analyzers.framework_place import trainer_place
    from mpsprofiler.diagnosis.engine import phrase_for
    from mpsprofiler.diagnosis.rules import builtin_rules_dir, load_rules

    script = tmp_path / "train.py"
    script.write_text("from transformers import Trainer, TrainingArguments\n\n\ndef main():\n"
                      "    args = TrainingArguments(output_dir='out', max_steps=9,\n"
                      "                             dataloader_num_workers=0)\n"
                      "    Trainer(model=None, args=args).train()\n\n\nmain()\n")
    session: Any = SimpleNamespace(model={"framework": "transformers Trainer"}, framework="transformers Trainer",
                                   run={"cwd": str(tmp_path)})
    place = trainer_place(session, str(script), 7, 2)
    assert place is not None
    assert (place["loader_name"], place["loader_where"]) == ("trainer_started", "trainer_rewrite")  # codes
    words = next(iter(load_rules([builtin_rules_dir() / "dataloader-stall.yaml"]))).phrases  # the rule file's
    assert phrase_for(words, place, "loader_name", ()) == "the Trainer's training DataLoader (started at train.py:7)"
    assert phrase_for(words, place, "loader_where", ()) == \
        "The Trainer builds it from its `TrainingArguments`: change them (train.py:5) to"
    code = place["loader_code"]
    assert "output_dir='out'" in code and "dataloader_num_workers=2" in code and "dataloader_num_workers=0" not in code
    assert "dataloader_persistent_workers=True" in code and 'if __name__ == "__main__":' in code
    evaluation = trainer_place(session, str(script), 7, 2, side=True)  # its eval loader: the same arguments
    assert evaluation is not None and evaluation["loader_code"] == code
    assert phrase_for(words, evaluation, "loader_name", ()) == \
        "the Trainer's evaluation DataLoader (started at train.py:7)"
    assert trainer_place(SimpleNamespace(framework="lightning", run={}), str(script), 7, 2) is None  # type: ignore[arg-type]
    missing = trainer_place(session, str(tmp_path / "gone.py"), 3, 4)
    assert missing is not None and "dataloader_num_workers=4," in missing["loader_code"]


# -- the real libraries, through the real CLI -------------------------------------------
def has(*modules: str) -> bool:
    return all(importlib.util.find_spec(m) is not None for m in modules)


RUNS: dict[str, tuple[str, dict[str, str], tuple[str, ...], tuple[str, ...]]] = {
    # name: (script, env, modules it needs, mpsprof run options); one run per framework,
    # all at once: CI's framework stage (.ci/run) is this fixture, pip install included
    "trainer": ("hf_trainer.py", {"STEPS": "30", "ACCUM": "2", "COLLATE_SLEEP": "0.03"},
                ("transformers", "accelerate"), ()),
    "accelerate": ("accel_loop.py", {"STEPS": "30"}, ("accelerate",), ()),
    # mpsprof's own num_workers fix applied to a loader that sleeps: 2 workers, 2 torch
    # threads; training_step keeps its logits in self.outs
    "lightning": ("lightning_val.py", {"STEPS": "40", "ACCUM": "2", "SAMPLE_SLEEP": "0.003", "LEAK": "1",
                                     "OMP_NUM_THREADS": "2", "MKL_NUM_THREADS": "2"},
                  ("lightning",), ("--set", "dataloader.num_workers=2")),
}


class Run:
    def __init__(self, proc: subprocess.CompletedProcess[str], run_dir: Path, seconds: float) -> None:
        self.proc = proc
        self.run_dir = run_dir
        self.seconds = seconds
        self.summary = read_summary(run_dir, missing_ok=True)

    @property
    def steps(self) -> dict[str, Any]:
        return dict(self.summary.get("steps") or {})

    @property
    def rules(self) -> list[str]:
        return [f["rule"] for f in self.summary.get("findings") or []]

    @property
    def planned(self) -> set[int | None]:
        """The run lengths op accounting was told (``planned`` in its events; None: not told)."""
        return {e.get("planned") for e in read_events(self.run_dir) if e.get("k") == "ops"}

    def printed(self, name: str) -> int:
        """The framework's own count, as the script prints it (``global_step 40``)."""
        m = re.search(rf"{name} (\d+)", self.proc.stdout)
        assert m, self.proc.stdout[-2000:] + self.proc.stderr[-3000:]
        return int(m.group(1))


def run_script(tmp: Path, name: str, script: str, env: dict[str, str], options: tuple[str, ...] = ()) -> Run:
    run_dir = tmp / name
    started = time.monotonic()
    proc = mpsprof_cli("run", "--headless", "-o", str(run_dir), *options, str(SCRIPTS / script), cwd=tmp,
                       env=child_env(**{**OFFLINE, "OUT_DIR": str(tmp / f"{name}_out"), **env}), timeout=300)
    return Run(proc, run_dir, time.monotonic() - started)


@pytest.fixture(scope="module")
def framework_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Run]:
    """Every installed framework's run, all at once (each mostly imports its library)."""
    tmp = tmp_path_factory.mktemp("frameworks")
    wanted = {name: spec for name, spec in RUNS.items() if has(*spec[2])}
    with ThreadPoolExecutor(3) as pool:
        futures = {name: pool.submit(run_script, tmp, name, script, env, options)
                   for name, (script, env, _, options) in wanted.items()}
        return {name: future.result() for name, future in futures.items()}


def framework_run(runs: dict[str, Run], name: str) -> Run:
    if name not in runs:
        pytest.skip(f"needs {', '.join(RUNS[name][2])} (the frameworks extra)")
    run = runs[name]
    assert run.proc.returncode == 0, run.proc.stderr[-3000:]
    return run


@pytest.mark.slow
def test_a_trainer_counts_its_optimizer_steps(framework_runs: dict[str, Run]) -> None:
    """Trainer.state.global_step, not one more (accelerate's look-ahead batch), and with
    gradient_accumulation_steps=2 its 30 updates of 2 batches each, not the batches
    fetched up front."""
    run = framework_run(framework_runs, "trainer")
    assert run.steps["count"] == run.printed("global_step") == 30
    assert run.steps["mode"] == "optimizer"
    assert run.steps["framework"] == "transformers Trainer"
    assert "of a Hugging Face Trainer" in run.proc.stderr
    assert run.steps["batches"] == run.printed("global_step") * 2
    assert run.planned == {30}  # the Trainer's state.max_steps, read at its first step


@pytest.mark.slow
def test_a_trainer_with_a_slow_collator_is_told_its_training_arguments(framework_runs: dict[str, Run]) -> None:
    """The data_collator sleeps 30 ms a batch: the stall fix says what to set on
    TrainingArguments (the Trainer builds the loader), and the batch size is the
    Trainer's 8, not None (accelerate rebuilds the loader with batch_sampler=)."""
    run = framework_run(framework_runs, "trainer")
    stall = [f for f in run.summary["findings"] if f["rule"].startswith("dataloader-stall")]
    assert stall, run.rules
    fix = stall[0]["fix"]
    workers = stall[0]["facts"].get("suggested_num_workers") or re.search(r"num_workers=(\d+)", fix).group(1)
    assert "TrainingArguments(" in fix and f"dataloader_num_workers={workers}," in fix
    assert "dataloader_pin_memory=False" in fix
    assert "site-packages" not in fix and "site-packages" not in stall[0]["evidence"]
    assert "the Trainer's training DataLoader (started at" in stall[0]["evidence"]
    assert "batch of None samples" not in stall[0]["evidence"]
    assert run.summary["dataloaders"][0]["batch_size"] == 8


@pytest.mark.slow
def test_a_trainer_that_reads_its_loader_in_one_pass_is_not_told_persistent_workers(
        framework_runs: dict[str, Run]) -> None:
    """``max_steps`` within the first epoch (30 updates of 2 batches over 60 batches): one
    iterator over the training loader, so ``dataloader_persistent_workers=True`` keeps the
    workers for a second pass there is none of (torch's ``DataLoader.__iter__`` reuses a
    persistent iterator only from the second ``iter()`` on). The fix said to set it."""
    run = framework_run(framework_runs, "trainer")
    (trained,) = [d for d in run.summary["dataloaders"] if d.get("hook") == "get_train_dataloader"]
    assert trained["iters"] == 1, trained
    stall = next(f for f in run.summary["findings"] if f["rule"].startswith("dataloader-stall"))
    code = fix_code(stall)
    assert "dataloader_num_workers=" in code and "dataloader_num_workers=0" not in code, code
    assert "persistent_workers" not in code, code
    assert "read the loader in one pass" in " ".join(stall["fix"].split()), stall["fix"]


@pytest.mark.slow
def test_a_trainer_that_reads_its_loader_over_epochs_is_told_persistent_workers(tmp_path: Path) -> None:
    """The clean side: the same 30 updates over a training set of 15, two epochs, two
    iterators: the workers would start again at the second, and the fix keeps them."""
    if not has("transformers", "accelerate"):
        pytest.skip("needs transformers, accelerate (the frameworks extra)")
    script, env, _, _ = RUNS["trainer"]
    run = run_script(tmp_path, "trainer_epochs", script, {**env, "EPOCHS": "2"})
    assert run.proc.returncode == 0, run.proc.stderr[-3000:]
    assert run.printed("global_step") == 30
    (trained,) = [d for d in run.summary["dataloaders"] if d.get("hook") == "get_train_dataloader"]
    assert trained["iters"] == 2, trained
    stall = next(f for f in run.summary["findings"] if f["rule"].startswith("dataloader-stall"))
    code = fix_code(stall)
    assert "dataloader_num_workers=" in code and "dataloader_persistent_workers=True" in code, code
    assert "one pass" not in stall["fix"], stall["fix"]


@pytest.mark.slow
def test_the_stall_fix_try_sets_reaches_the_trainers_loader(framework_runs: dict[str, Run], tmp_path: Path) -> None:
    """What `mpsprof try` sets for the Trainer's stall (experiment/candidates.py: the
    workers on `dataloader.N`, the loader the finding names, counted as the probe counts
    them, accelerate's rebuilt DataLoaderShard included) reaches the loader the Trainer
    trains from: run again with that setting, that loader has the workers and the wait
    falls."""
    from mpsprofiler.diagnosis import diagnose
    from mpsprofiler.experiment.candidates import FIXES
    from mpsprofiler.session.recording import load_run

    run = framework_run(framework_runs, "trainer")
    stall = [f for f in run.summary["findings"] if f["rule"].startswith("dataloader-stall")]
    assert stall, run.rules
    facts = diagnose(load_run(run.run_dir).session).facts  # what `try` reads
    settings = FIXES[stall[0]["rule"]](facts)
    assert settings is not None, {k: facts.get(k) for k in ("suggested_num_workers", "num_workers", "loader_created")}
    (number, change), = settings["dataloader"].items()
    assert number != "*", settings  # the one loader named, not every loader
    workers = change["num_workers"]
    script, env, _, _ = RUNS["trainer"]
    again = run_script(tmp_path, "trainer_fixed", script, env, ("--set", f"dataloader.{number}.num_workers={workers}"))
    assert again.proc.returncode == 0, again.proc.stderr[-3000:]
    assert again.printed("global_step") == 30
    trained = max(again.summary["dataloaders"], key=lambda d: d.get("fetch_s") or 0.0)
    assert trained["num_workers"] == workers, again.summary["dataloaders"]
    # the seconds the training waited for that loader, not their share of the run: the share
    # is of a compute time other programs stretch (1.8 of 2 cores busy beside the first run,
    # 1.5 beside the second: 1.92 s -> 0.60 s of waiting, 110 -> 31 ms a step, the share 0.53 -> 0.68)
    first = max(run.summary["dataloaders"], key=lambda d: d.get("fetch_s") or 0.0)
    before, after = first["fetch_s"], trained["fetch_s"]
    assert after < before / 2, (before, after, run.steps["data_wait_share"], again.steps["data_wait_share"])


@pytest.mark.slow
def test_an_accelerate_loop_counts_its_steps_and_keeps_no_false_leak(framework_runs: dict[str, Run]) -> None:
    """A plain accelerate loop: 30 of 30, and no 'Tensors kept ... pile up' for the batch
    its DataLoaderShard fetches ahead (memory is flat)."""
    run = framework_run(framework_runs, "accelerate")
    assert run.steps["count"] == run.printed("optimizer_steps") == 30
    assert run.steps["framework"] == "accelerate"
    assert run.steps["fetched_ahead"] == 1
    assert run.planned == {None}  # the script's own loop: nothing announces its length
    assert not [r for r in run.rules if r.startswith("leak") or r == "tensor-leak"], run.rules
    assert not [e for e in read_events(run.run_dir) if e["k"] == "leaks"]


@pytest.mark.slow
def test_lightning_leaves_out_its_sanity_check(framework_runs: dict[str, Run]) -> None:
    """Lightning with validation and accumulate_grad_batches=2: its 2 sanity-check batches
    run no optimizer step and are not steps; 40 batches are 20 updates. `--set
    dataloader.num_workers=2` reached the loader Lightning iterates."""
    run = framework_run(framework_runs, "lightning")
    assert run.steps["count"] == run.printed("global_step") == 20
    assert run.steps["framework"] == "lightning"
    assert run.planned == {20}  # estimated_stepping_batches: 40 batches, accumulation 2
    assert run.steps["fetched_ahead"] == 2
    assert {d["num_workers"] for d in run.summary["dataloaders"]} == {2}


@pytest.mark.slow
def test_a_slow_validation_set_is_told_in_val_dataloaders_terms(tmp_path: Path) -> None:
    """Validation every 15 batches over 4 slow batches: the stall names the evaluation loader,
    sizes its workers from its own batches (4: a pass has 4), and says Lightning's
    `val_dataloader()`, not `train_dataloader()`; Lightning's own count is the step count.
    (A run of its own, after the shared ones: beside them a fourth run slowed the timed ones.)"""
    if not has("lightning"):
        pytest.skip("needs lightning (the frameworks extra)")
    run = run_script(tmp_path, "lightning_eval", "lightning_slow_eval.py", {}, ())
    assert run.proc.returncode == 0, run.proc.stderr[-3000:]
    assert run.steps["count"] == run.printed("global_step") == 60, run.steps
    found = {f["rule"]: f for f in run.summary["findings"]}
    stall = found.get("dataloader-stall-critical") or found["dataloader-stall"]
    assert "2nd DataLoader" in stall["evidence"] and "num_workers=4" in stall["title"], stall
    assert "val = DataLoader(SlowEval(), batch_size=16, num_workers=4, persistent_workers=True)" in stall["fix"]
    assert "`val_dataloader()`" in stall["fix"] and "train_dataloader" not in stall["fix"], stall["fix"]


@pytest.mark.slow
def test_a_lightning_loader_with_workers_already_is_not_told_more_would_not_pay(tmp_path: Path) -> None:
    """A DataModule's loader with 2 persistent workers and a collate_fn that sleeps 30 ms a
    batch (1 ms of training): more workers help (8 took a 60-step run from 14 ms to 2 ms a
    step through `mpsprof try`). In a run this short (30 steps, ~0.5 s) the workers' CPU is
    mostly not read (under two 0.5 s samples of it); then it was told "With 2 workers
    already, more would not pay" on a machine with one free core. Now the fix suggests more workers (CPU measured) or
    says how to measure them (`mpsprof try --set dataloader.num_workers=N`), never that
    more would not pay. Lightning's count is the step count."""
    if not has("lightning"):
        pytest.skip("needs lightning (the frameworks extra)")
    run = run_script(tmp_path, "lightning_cw", "lightning_modes.py", {"MODE": "collate_workers", "STEPS": "30"}, ())
    assert run.proc.returncode == 0, run.proc.stderr[-3000:]
    assert run.steps["count"] == run.printed("global_step") == 30, run.steps
    found = {f["rule"]: f for f in run.summary["findings"]}
    stall = found.get("dataloader-stall-critical") or found.get("dataloader-stall")
    assert stall is not None, run.rules
    fix = stall["fix"]
    assert "more would not pay" not in fix, fix
    said = " ".join(fix.split())
    if "mpsprof could not tell which" in said:  # the workers' CPU not read: how to measure more
        tried = re.search(r"`mpsprof try --set dataloader\.num_workers=(\d+)`", said)
        assert tried and int(tried.group(1)) > 2, said
    else:  # read: more workers, in the DataModule's train_dataloader() line
        suggested = re.search(r"num_workers=(\d+),", fix)
        assert suggested and int(suggested.group(1)) > 2, fix


@pytest.mark.slow
def test_a_trainer_that_only_evaluates_is_named_and_told_its_training_arguments(tmp_path: Path) -> None:
    """`Trainer.evaluate()` alone (a checkpoint's evaluation) through a collator that
    sleeps 40 ms a batch: no optimizer ever steps, so the first step never named the
    framework, and the stall was told to build `loader = DataLoader(dataset, ...)`, which a
    Trainer user never writes. The loader's first iteration names it now: the steps are
    the evaluation's batches "of a Hugging Face Trainer", and the fix is the script's
    TrainingArguments with dataloader_num_workers (4 workers: eval_runtime 2.37 / 1.73 s
    -> 1.02 s on sweep s54 D's hf_eval_slow.py)."""
    if not has("transformers", "accelerate"):
        pytest.skip("needs transformers and accelerate (the frameworks extra)")
    run = run_script(tmp_path, "trainer_eval_only", "trainer_modes.py", {"MODE": "eval_only"}, ())
    assert run.proc.returncode == 0, run.proc.stderr[-3000:]
    assert run.printed("global_step") == 0
    assert run.steps["mode"] == "dataloader" and run.steps["framework"] == "transformers Trainer", run.steps
    assert "from DataLoader batches of a Hugging Face Trainer" in run.proc.stderr
    stall = next((f for f in run.summary["findings"] if f["rule"].startswith("dataloader-stall")), None)
    assert stall is not None, run.rules
    workers = re.search(r"num_workers=(\d+)", stall["title"])
    assert workers, stall["title"]
    fix = stall["fix"]
    assert "args = TrainingArguments(" in fix and f"dataloader_num_workers={workers.group(1)}," in fix, fix
    assert "DataLoader(dataset" not in fix and "`Trainer.get_eval_dataloader`" in fix, fix
    assert "the Trainer's evaluation DataLoader" in stall["evidence"], stall["evidence"]
    # no training steps for the evaluation to sit between: its batches are the steps
    assert "the run trained no step" in stall["evidence"] and "between training steps" not in stall["evidence"]


@pytest.mark.slow
def test_lightning_leak_names_self_outs_and_its_append_line(framework_runs: dict[str, Run]) -> None:
    """`self.outs.append(logits)` in training_step: no user frame holds the module when
    the leak is checked (Lightning's optimizer closure runs training_step); the finding
    names the container and the append line, not the line that made the logits."""
    run = framework_run(framework_runs, "lightning")
    leak = next((f for f in run.summary["findings"] if f["rule"].startswith("leak-site")), None)
    assert leak is not None, run.rules
    source = (SCRIPTS / "lightning_val.py").read_text().splitlines()
    append = next(i for i, line in enumerate(source, 1) if "self.outs.append(logits)" in line)
    assert f"lightning_val.py:{append}" in leak["title"]
    assert f"They are kept in `self.outs`, added to at {SCRIPTS / 'lightning_val.py'}:{append}" in leak["evidence"] or (
        f"They are kept in `self.outs`, added to at lightning_val.py:{append}" in leak["evidence"]), leak["evidence"]


@pytest.mark.slow
def test_sleeping_workers_are_not_busy_threads(framework_runs: dict[str, Run]) -> None:
    """After the num_workers fix, Lightning's 2 workers sleep on their samples: their
    measured CPU (well under a core between them), not their number, joins torch's 2
    threads; no thread warning unless other programs took the cores."""
    from mpsprofiler.diagnosis.engine import phrase_for
    from mpsprofiler.diagnosis.facts import collect_facts
    from mpsprofiler.diagnosis.rules import builtin_rules_dir, load_rules
    from mpsprofiler.session.recording import load_run

    run = framework_run(framework_runs, "lightning")
    facts = collect_facts(load_run(run.run_dir).session)
    assert facts["torch_threads"] == 2
    assert facts["thread_workers_text"] in ("measured", "measured_one") and facts["thread_worker_processes"] == 2
    words = next(iter(load_rules([builtin_rules_dir() / "thread-oversubscription.yaml"]))).phrases
    assert "2 DataLoader worker processes using" in (phrase_for(words, facts, "thread_workers_text", ()) or "")
    assert facts["workers_busy_cores"] < 0.6
    assert facts["busy_threads"] == round(2 + facts["workers_busy_cores"])
    if (facts.get("others_busy_cores") or 0.0) < 0.3:
        assert "thread-oversubscription" not in run.rules


@pytest.mark.slow
def test_the_trainers_own_loss_reads_are_told_by_their_setting_and_the_fix_works(
        framework_runs: dict[str, Run], tmp_path: Path) -> None:
    """With gradient_accumulation_steps=2 the Trainer's NaN/inf loss filter reads the loss
    4 times a step inside `trainer.train()` (transformers/trainer.py: `torch.isnan(...) or
    torch.isinf(...)` per micro-batch). The fix names that frame and is the script's own
    TrainingArguments call with `logging_nan_inf_filter=False`, its other arguments as
    written; that call, put in the script as written, leaves no such read (run again)."""
    run = framework_run(framework_runs, "trainer")
    found = [f for f in run.summary["findings"] if f["rule"] == "sync-heavy-mac"]
    assert len(found) == 1, run.rules
    assert "inside transformers/trainer.py:" in found[0]["evidence"]
    script = SCRIPTS / "hf_trainer.py"
    start = line_of(script, "args = TrainingArguments(")
    assert f"hf_trainer.py:{start})" in found[0]["fix"]
    code = fix_code(found[0])
    assert "logging_nan_inf_filter=False" in code and "gradient_accumulation_steps=ACCUM" in code
    # the fix as written, in place of the script's statement (a copy of the script)
    source = script.read_text()
    stmt = _statement_at(source, start)
    lines = source.splitlines()
    fixed_source = "\n".join(lines[:start - 1] + textwrap.indent(code, " " * stmt.col_offset).splitlines()
                             + lines[stmt.end_lineno:]) + "\n"
    fixed_script = tmp_path / "hf_trainer.py"
    fixed_script.write_text(fixed_source)
    fixed = run_script(tmp_path, "fixed", str(fixed_script), {"STEPS": "12", "ACCUM": "2"})
    assert fixed.proc.returncode == 0, fixed.proc.stderr[-3000:]
    assert fixed.printed("global_step") == 12 and "sync-heavy-mac" not in fixed.rules
    syncs = [s for e in read_events(fixed.run_dir) if e.get("k") == "ops" for s in e.get("syncs") or []]
    assert not [s for s in syncs if "isnan" in (s.get("via") or {}).get("code", "")], syncs
    sampled = [e for e in read_events(fixed.run_dir) if e.get("k") == "ops"]
    assert sampled  # the reads were looked for: op accounting sampled steps of the fixed run


def _statement_at(source: str, line: int) -> ast.stmt:
    """The statement of ``source`` that starts at ``line`` (at any depth)."""
    return next(n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.stmt) and n.lineno == line)


@pytest.mark.slow
def test_plain_torch_scripts_optimizer_per_step_and_first_step_crash(tmp_path: Path) -> None:
    """No framework needed. An optimizer built every iteration: 60 steps of 60 (issue 33:
    13). A crash in the first step: the crash alone (no 'mark them with
    mpsprofiler.step()'), its first line and the traced line, not a cut traceback."""
    with ThreadPoolExecutor(2) as pool:
        per_step = pool.submit(run_script, tmp_path, "per_step", "optimizer_per_step.py", {})
        crash = pool.submit(run_script, tmp_path, "crash", "crash_first_step.py", {})
        per_step_run, crash_run = per_step.result(), crash.result()
    assert per_step_run.proc.returncode == 0, per_step_run.proc.stderr[-3000:]
    assert per_step_run.steps["count"] == 60
    assert per_step_run.steps.get("framework") is None
    assert crash_run.proc.returncode == 1
    assert "no-step-signal" not in crash_run.rules and "no-step-signal" not in crash_run.proc.stderr
    line = next(x for x in crash_run.proc.stderr.splitlines() if x.startswith("crash       "))
    assert line == ("crash       RuntimeError: shape mismatch in the first step: expected [4, 3], got [4, 2]"
                    f" at {SCRIPTS / 'crash_first_step.py'}:19")
    assert "steps       0 (the script crashed before its first step ended)" in crash_run.proc.stderr


def test_doctor_says_when_torchvision_does_not_match_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    """PyPI's torchvision (a CUDA build on Linux) beside a CPU torch fails to import, and
    `import lightning` with it (torchmetrics imports torchvision); a torchvision pinned to
    another torch release fails too. From the metadata only (fake environments)."""
    from mpsprofiler import doctor

    monkeypatch.setattr(doctor.sys, "platform", "linux")
    check = doctor.check_torchvision
    assert check({"torch": "2.13.0+cpu"}).status == "info"
    cuda_beside_cpu = check({"torch": "2.13.0+cpu", "torchvision": "0.28.0", "torchvision_torch": "2.13.0"})
    assert cuda_beside_cpu.status == "warn" and "index-url https://download.pytorch.org/whl/cpu" in cuda_beside_cpu.fix
    other_release = check({"torch": "2.13.0", "torchvision": "0.27.0", "torchvision_torch": "2.12.0"})
    assert other_release.status == "fail" and "torch 2.12.0" in other_release.detail
    matching = check({"torch": "2.13.0+cpu", "torchvision": "0.28.0+cpu", "torchvision_torch": "2.13.0"})
    assert matching.status == "ok"
    assert "torchvision" in [c.id for c in doctor.run_checks({"torch": "2.13.0"})]


class Keeper:
    """A LightningModule as the leak check meets it: no user frame holds it at the step
    boundary (Lightning calls training_step inside its optimizer closure)."""

    def __init__(self) -> None:
        self.outs: list[Any] = []

    def training_step(self, logits: Any) -> None:
        self.outs.append(logits)  # the line that keeps the memory


def test_a_leak_kept_in_an_attribute_names_self_attr_and_its_append_line() -> None:
    """From the tensor to the list to the object to the user's class: `self.outs` and the
    `self.outs.append` line; a tensor kept by a library's object (not user code) or by
    nothing is no owner."""
    import torch

    from mpsprofiler.probe.leak_owner import find_owner
    from mpsprofiler.probe.ops_leaks import _adding_lines

    def is_user(code: Any) -> bool:
        return bool(code.co_filename == __file__)

    keeper, t = Keeper(), torch.ones(3)
    keeper.training_step(t)
    append_line = next(i for i, line in enumerate(Path(__file__).read_text().splitlines(), 1)
                       if "self.outs.append(logits)  # the line" in line)
    found = find_owner(t, is_user, _adding_lines)
    assert found is not None
    assert (found["name"], found["line"], found["owner"], found["size"]) == ("self.outs", append_line, "Keeper", 1)
    keeper.__dict__  # noqa: B018  (a materialised __dict__ is one referrer more: still found)
    assert (find_owner(t, is_user, _adding_lines) or {}).get("line") == append_line
    assert find_owner(t, lambda code: False, _adding_lines) is None
    assert find_owner(torch.ones(2), is_user, _adding_lines) is None


def test_unmeasured_workers_are_not_counted_as_busy_threads() -> None:
    """A run too short for two CPU samples of its workers: 4 workers beside torch's 2
    threads on 4 cores are not 6 busy threads (a sleeping worker uses almost no CPU; an
    instrument that did not measure makes no finding). No library needed."""
    from mpsprofiler.diagnosis.analyzers.threads import thread_facts
    from mpsprofiler.diagnosis.engine import phrase_for
    from mpsprofiler.diagnosis.rules import builtin_rules_dir, load_rules
    from mpsprofiler.session.session import Session

    session = Session(read_back=True)
    session.env.update({"torch_threads": 2, "cores_physical": 4, "cores_logical": 4})
    session.dataloaders[1] = {"id": 1, "num_workers": 4, "len": 10, "created": 1}  # type: ignore[typeddict-item]
    facts = thread_facts(session)
    assert facts["workers_busy_cores"] == 0.0 and facts["busy_threads"] == 2
    assert facts["thread_workers_text"] == "unmeasured"  # a code: the rule file words it
    words = next(iter(load_rules([builtin_rules_dir() / "thread-oversubscription.yaml"]))).phrases
    assert phrase_for(words, facts, "thread_workers_text", ()) == \
        "4 DataLoader worker processes (not counted: their CPU use was not measured in so short a run)"
    assert facts["thread_oversubscription"] < 1.5


@pytest.mark.parametrize("launch", [["accelerate", "launch", "--cpu"], ["--", "accelerate", "launch"],
                                    ["accelerate-launch", "--mixed_precision", "bf16"]])
def test_accelerate_launch_is_told_the_command_that_profiles_its_script(tmp_path: Path, launch: list[str]) -> None:
    """`mpsprof run accelerate launch train.py` said "no such script: accelerate". The
    launcher runs the script in a process mpsprof does not enter; the error gives the
    command that profiles it (the script itself, its ACCELERATE_* settings in the
    environment, which `Accelerator()` reads: accelerate/state.py), and runs nothing."""
    (tmp_path / "train.py").write_text("print('ran')\n")
    proc = mpsprof_cli("run", "--headless", *launch, "train.py", "--lr", "1", cwd=tmp_path, timeout=120)
    assert proc.returncode == 2 and proc.stdout == "", proc.stderr
    said = " ".join(proc.stderr.split())
    assert "no such script" not in said and "Traceback" not in said, said
    assert "`mpsprof run train.py ...`" in said and "`mpsprof run --nproc-per-node N train.py ...`" in said, said
    assert "ACCELERATE_MIXED_PRECISION=bf16 mpsprof run train.py" in said
    assert not (tmp_path / "mpsprof-runs").exists()


@pytest.mark.slow
@pytest.mark.skipif(not has("transformers", "accelerate", "lightning"), reason="needs the frameworks extra")
def test_a_crash_in_a_framework_first_step_is_the_crash_only(tmp_path: Path) -> None:
    """Issue 28: the first training step raises under a Trainer (accumulation window and
    look-ahead fetched first), Lightning (after its sanity check) and accelerate (its
    look-ahead): no "crashed after its first step (step 0)" or "after 2 steps" counted from
    the batches fetched ahead, no step figures; the crash, at the line that raised."""
    with ThreadPoolExecutor(3) as pool:
        runs = {fw: pool.submit(run_script, tmp_path, fw, "framework_crash_first_step.py", {"FRAMEWORK": fw})
                for fw in ("trainer", "lightning", "accelerate")}
        done = {fw: future.result() for fw, future in runs.items()}
    line = line_of(SCRIPTS / "framework_crash_first_step.py", "torch.nn.functional.mse_loss(out, labels)")
    for fw, run in done.items():
        assert run.proc.returncode == 1, (fw, run.proc.stderr[-3000:])
        assert run.steps["count"] == 0, (fw, run.steps)
        assert "steps       0 (the script crashed before its first step ended)" in run.proc.stderr, fw
        crash = next(f for f in run.summary["findings"] if f["rule"] == "crash")
        assert crash["title"].startswith("Crashed before its first step: RuntimeError: The size of tensor a (4)"), fw
        assert crash["title"].endswith(f"framework_crash_first_step.py:{line}"), (fw, crash["title"])
        assert not [r for r in run.rules if r not in ("crash", "other-programs-busy")], (fw, run.rules)


@pytest.mark.slow
@pytest.mark.skipif(not has("transformers", "accelerate"), reason="needs the frameworks extra")
def test_a_trainers_kept_logits_are_counted_at_their_size_train_and_eval(tmp_path: Path) -> None:
    """Issue 28: compute_loss keeps its logits in self.outs, in training (8 x 24 x 200
    floats, 150 KiB a step) and in evaluation every 10 steps (2 batches of 32, 600 KiB
    each: 120 KiB a step). The line's rate is the list's bytes grown per step, 270 KiB,
    not its items per step times a sampled training item's size (1.2 x 150 = 180 KiB)."""
    run = run_script(tmp_path, "trainer_leak_eval", "trainer_modes.py", {"MODE": "leak_eval", "STEPS": "150"})
    assert run.proc.returncode == 0, run.proc.stderr[-3000:]
    assert run.steps["count"] == run.printed("global_step") == 150
    leak = next((f for f in run.summary["findings"] if f["rule"].startswith("leak-site")), None)
    assert leak is not None, run.rules
    rate = re.search(r"about ([\d.]+) KiB more every step", leak["evidence"])
    assert rate and 250 <= float(rate.group(1)) <= 290, leak["evidence"]


@pytest.mark.slow
@pytest.mark.skipif(not has("transformers", "accelerate"), reason="needs the frameworks extra")
def test_a_trainers_evaluate_before_train_is_no_steps(tmp_path: Path) -> None:
    """``trainer.evaluate()`` of the untrained model (100 batches, more than the probe holds
    before a first training signal), then ``trainer.train()``: 131 steps of 30 before (the
    evaluation's batches confirmed as the steps of a loop without training)."""
    run = run_script(tmp_path, "evaluate_first", "hf_evaluate_first.py", {})
    assert run.proc.returncode == 0, run.proc.stderr[-3000:]
    assert run.steps["count"] == run.printed("global_step") == 30, run.steps
    assert run.steps["fetched_ahead"] >= 100, run.steps


@pytest.mark.slow
@pytest.mark.skipif(not has("lightning"), reason="needs lightning (the frameworks extra)")
def test_lightnings_evaluation_after_fit_is_not_the_training_loaders_compute(tmp_path: Path) -> None:
    """Issue 28: a slow training set, validation every 20 steps inside fit, then
    trainer.validate() and trainer.test() over 20 batches each. The stall's evidence
    ("computed for X ms" a step) and its fix ("It trains in Y ms" a batch, one batch a
    step) agree: the loaders' shares of the steps' wait and batches leave out the passes
    after fit (they made Y 50% above X), and a wait for the validation batches inside fit is
    no training."""
    run = run_script(tmp_path, "lightning_after_eval", "lightning_modes.py", {"MODE": "after_eval", "STEPS": "60"})
    assert run.proc.returncode == 0, run.proc.stderr[-3000:]
    assert run.steps["count"] == run.printed("global_step") == 60
    stall = next((f for f in run.summary["findings"] if f["rule"].startswith("dataloader-stall")), None)
    assert stall is not None, run.rules
    computed = re.search(r"computed for ([\d.]+) ms", stall["evidence"])
    trains = re.search(r"It trains in ([\d.]+) ms", stall["fix"])
    assert computed and trains, (stall["evidence"], stall["fix"])
    assert abs(float(trains.group(1)) / float(computed.group(1)) - 1.0) < 0.15, (computed.group(0), trains.group(0))
    test_loader = next(d for d in run.summary["dataloaders"] if d.get("role") == "test")
    assert test_loader.get("after_fetches") == test_loader.get("fetches") == 19, test_loader
