"""Every training loop is seen: loops without torch.optim (backward passes count the
steps), loops nothing can count (the one-line ``mpsprofiler.step()`` fix is shown), real
scripts through the real CLI."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import FakeClock, child_env, mpsprof_cli, read_summary
from mpsprofiler.events.step_rows import as_read
from mpsprofiler.probe.steps import StepTracker

SCRIPTS = Path(__file__).parent.parent / "scripts_loops"


def mpsprof_run(tmp_path: Path, script: str, *args: str, **env: str) -> tuple[subprocess.CompletedProcess, dict, Path]:
    run_dir = tmp_path / Path(script).stem
    proc = mpsprof_cli("run", "--headless", "-o", str(run_dir), str(SCRIPTS / script), *args,
                       env=child_env(**env), timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc, read_summary(run_dir), run_dir


@pytest.mark.slow
def test_manual_updates_count_one_step_per_update(tmp_path):
    """pytorch/examples regression: ``param.data.add_(-lr * grad)``, no optimizer, no DataLoader."""
    proc, summary, _ = mpsprof_run(tmp_path, "regression.py", MAX_BATCHES="25")
    updates = int(re.search(r"after (\d+) batches", proc.stdout).group(1))
    assert summary["steps"]["count"] == updates == 25
    assert summary["steps"]["mode"] == "backward"
    assert "from backward passes" in proc.stderr
    assert "no-step-signal" not in proc.stderr


@pytest.mark.slow
def test_several_backward_passes_per_iteration_are_one_step(tmp_path):
    """Three ``.backward()`` lines and a gradient penalty (``autograd.grad``) per iteration."""
    proc, summary, _ = mpsprof_run(tmp_path, "gan_manual.py", ITERS="9")
    assert "iterations 9" in proc.stdout
    assert summary["steps"]["count"] == 9
    assert summary["steps"]["mode"] == "backward"


@pytest.mark.slow
def test_k_fold_training_with_a_new_model_per_fold_counts_every_optimizer_step(tmp_path):
    """A new model and optimizer per fold: 750 optimizer steps in 5 folds read 746 (each
    fold's first step merged into the previous fold's last)."""
    proc, summary, _ = mpsprof_run(tmp_path, "kfold_models.py")
    updates = int(re.search(r"optimizer steps (\d+)", proc.stdout).group(1))
    assert summary["steps"]["count"] == updates, (summary["steps"], updates)
    assert summary["steps"]["mode"] == "optimizer" and summary["steps"]["optimizers"] == 1


@pytest.mark.slow
def test_a_loop_nothing_counts_says_so_with_the_fix(tmp_path):
    proc, summary, run_dir = mpsprof_run(tmp_path, "no_signal.py")
    assert summary["steps"]["count"] == 0
    assert "[WARN] No training steps seen: mark them with mpsprofiler.step()  (no-step-signal)" in proc.stderr
    report = mpsprof_cli("report", str(run_dir), "--format", "md")
    assert report.returncode == 0, report.stderr
    assert "mpsprofiler.step()     # one call per training step" in report.stdout


def _tracker() -> tuple[StepTracker, FakeClock, list]:
    from mpsprofiler.devices.cpu import CpuBackend

    clock = FakeClock()
    emitted: list = []
    tracker = StepTracker(lambda kind, **f: emitted.append(as_read(f)), CpuBackend(), clock)
    tracker._mark_start()
    return tracker, clock, emitted


def _durations(tracker: StepTracker, emitted: list) -> list[float]:
    tracker.drain()
    return [d for e in emitted for d in e["dur"]]


def test_backward_cycle_closes_at_the_last_pass_of_each_iteration():
    tracker, clock, emitted = _tracker()
    for it in range(4):  # two sites per iteration, 1 s apart, iterations 3 s long
        clock.t = it * 3 + 1
        tracker.on_backward("critic", clock.t)
        clock.t = it * 3 + 2
        tracker.on_backward("generator", clock.t)
    tracker.finish()
    assert tracker.mode == "backward"
    assert _durations(tracker, emitted) == [2.0, 3.0, 3.0, 3.0]


def test_an_optimizer_outranks_backward_passes():
    tracker, clock, emitted = _tracker()
    opt = object()
    for it in range(3):
        clock.t = it + 0.5
        tracker.on_backward("loss", clock.t)
        clock.t = it + 0.6
        tracker.on_optimizer_step(opt)
    tracker.finish()
    assert tracker.mode == "optimizer"
    assert len(_durations(tracker, emitted)) == 3


def test_a_generator_stepping_every_second_batch_makes_no_step_of_its_own_at_the_end():
    """Lightning manual optimization, a GAN: the discriminator steps every batch, the
    generator every 2nd (after it). 384 batches made 385 steps: the last batch's generator
    step, alone after the last discriminator step, was closed as a step at exit."""
    import types

    tracker, clock, emitted = _tracker()
    disc = types.SimpleNamespace(param_groups=[{"params": [object()]}])
    gen = types.SimpleNamespace(param_groups=[{"params": [object()]}])
    for i in range(8):
        clock.t = i + 0.5
        tracker.on_optimizer_step(disc)
        if i % 2 == 1:
            clock.t = i + 0.7
            tracker.on_optimizer_step(gen)
    tracker.finish()
    assert len(_durations(tracker, emitted)) == 8


@pytest.mark.parametrize("gan", [False, True])
def test_a_new_model_and_optimizer_per_fold_counts_every_step(gan: bool):
    """k-fold cross-validation: a new model and optimizer each fold update new parameters.
    The learnt set of optimizers (the first fold's) was never complete again: every later
    step closed one step late and each fold's first step merged into the previous fold's
    last (750 optimizer steps in 5 folds read 746). A GAN per fold: two optimizers a step."""
    import types

    tracker, clock, emitted = _tracker()
    folds, steps = 3, 4
    for fold in range(folds):
        opts = [types.SimpleNamespace(param_groups=[{"params": [object()]}]) for _ in range(2 if gan else 1)]
        for i in range(steps):
            for k, opt in enumerate(opts):
                clock.t = (fold * steps + i) + 0.5 + 0.1 * k
                tracker.on_optimizer_step(opt)
    tracker.finish()
    durations = _durations(tracker, emitted)
    assert len(durations) == folds * steps, durations
    assert all(d == pytest.approx(1.0) for d in durations[1:]), durations


@pytest.mark.parametrize("passes", [1, 2])
def test_one_iteration_is_one_step(passes):
    tracker, clock, emitted = _tracker()
    for k in range(passes):
        clock.t = k + 1.0
        tracker.on_backward(f"site{k}", clock.t)
    tracker.finish()
    assert tracker.mode == "backward"
    assert _durations(tracker, emitted) == [float(passes)]


@pytest.mark.slow
def test_gradient_accumulation_counts_updates_not_micro_batches(tmp_path):
    for opt in ("1", ""):
        _, summary, _ = mpsprof_run(tmp_path / f"opt{opt}", "accumulate.py", OPT=opt, UPDATES="5", ACCUM="3")
        assert summary["steps"]["count"] == 5, opt
        assert summary["steps"]["mode"] == ("optimizer" if opt else "backward")


@pytest.mark.slow
def test_two_lbfgs_steps_get_op_accounting_and_the_float64_finding(tmp_path):
    """LBFGS runs its closure (forward and backward) many times per step: those passes are
    the optimizer's, and a run of 2 long steps is sampled (step 1) for op facts."""
    proc, summary, _ = mpsprof_run(tmp_path, "lbfgs_double.py", STEPS="2")
    assert summary["steps"]["count"] == 2
    assert summary["steps"]["mode"] == "optimizer"
    assert "(float64-mps)" in proc.stderr
    # LBFGS's own .item() / tensor-as-scalar calls are device syncs on a Mac: the
    # optimizer's, at its own lines, not the user's `optimizer.step(closure)` line
    syncs = next(f for f in summary["findings"] if f["rule"] == "sync-heavy-mac")["facts"]
    # named as torch's file (a script may be called lbfgs.py too), and the fix says that no
    # line of the script makes these reads (the generic "keep values on the device" does not apply)
    assert syncs["sync_top_line"].startswith("torch/optim/lbfgs.py:"), syncs["sync_top_line"]
    assert syncs["sync_top_module"] == "torch.optim.LBFGS.step"
    assert "optimizer.step(closure)" not in syncs["sync_table"]
    fix = next(f for f in summary["findings"] if f["rule"] == "sync-heavy-mac")["fix"]
    assert fix.startswith("These reads are torch's own, inside `torch.optim.LBFGS.step` (torch/optim/lbfgs.py)"), fix
    assert "norms = torch.stack" not in fix


@pytest.mark.slow  # not serial: 10.5 s of sleep against a 10 s bound, compile time far under it
def test_a_very_long_compiled_first_step_gets_the_warm_up_note(tmp_path):
    """torch.compile'd model, step 0 made > 10 s with a sleep; the same script with a
    short step 0 gets no note."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(2) as pool:
        slow = pool.submit(mpsprof_run, tmp_path / "slow", "compiled_first_step.py", FIRST_STEP_S="10.5")
        fast = pool.submit(mpsprof_run, tmp_path / "fast", "compiled_first_step.py", FIRST_STEP_S="0")
        (proc, summary, _), (fast_proc, _, _) = slow.result(), fast.result()
    assert summary["steps"]["count"] == 8
    assert "(long-first-step)" in proc.stderr
    assert re.search(r"Step 0 took 1\d\.\d s", proc.stderr)
    assert "long-first-step" not in fast_proc.stderr


@pytest.mark.serial
@pytest.mark.slow
def test_ddp_straggler_in_its_own_code_is_named_with_the_phase(tmp_path):
    """2-rank gloo DDP, no DataLoader; rank 1 sleeps 10 ms per step in its loop. Step times
    are equal (the all-reduce evens them out): the split of each rank's step names it.
    The same job without the sleep names no straggler."""
    script = str(Path(__file__).parent.parent / "scripts_dist" / "ddp_own_code.py")

    def run(name: str, slow_ms: str) -> tuple[subprocess.CompletedProcess, Path]:
        run_dir = tmp_path / name
        proc = mpsprof_cli("run", "--headless", "-o", str(run_dir), "--nproc-per-node", "2", script,
                           env=child_env(SLOW_MS=slow_ms), timeout=240)
        assert proc.returncode == 0, proc.stderr[-3000:]
        return proc, run_dir

    # one job at a time: four ranks on two cores would make stragglers of their own
    proc, run_dir = run("slow", "10")
    _, even_dir = run("even", "0")
    findings = read_summary(run_dir)["findings"]
    straggler = next(f for f in findings if f["rule"] == "straggler-rank-work")
    assert straggler["facts"]["straggler_rank"] == 1
    assert straggler["facts"]["straggler_cause"].startswith("its own code")
    assert "Rank 1 holds the job back: its own code" in proc.stderr
    assert not [f for f in read_summary(even_dir)["findings"] if f["rule"].startswith("straggler")]


@pytest.mark.slow
@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_hogwild_trainers_in_child_processes_are_reported_as_not_observed(tmp_path, method):
    """pytorch/examples mnist_hogwild-style: 2 trainer processes, the parent only evaluates."""
    proc, summary, _ = mpsprof_run(tmp_path, "hogwild.py", START_METHOD=method)
    assert proc.stdout.count(": 10 steps") == 2
    finding = next(f for f in summary["findings"] if f["rule"] == "unobserved-child-processes")
    assert finding["facts"]["child_processes"] == 2
    assert finding["facts"]["child_targets"] == "train"
    assert finding["facts"]["child_start_methods"] == method
    assert "Training in 2 child processes was not observed" in proc.stderr


GLOO_TEARDOWN_ABORT = "terminate called without an active exception"
"""torch 2.13's gloo on this CPU machine now and then aborts a rank as the ranks tear down,
after both printed their losses, bare as well (2 of 8 bare runs of spawn_ddp.py): such a run
is run again, at most twice; mpsprof does not enter the spawned ranks (no probe module there)."""


def _gloo_run(run, run_dir=None):  # type: ignore[no-untyped-def]
    """``run()`` again after a gloo teardown abort; ``run_dir``: the mpsprof run's ``-o``
    folder, emptied before a retry (a run directory takes one run: the retry was refused)."""
    for attempt in range(3):
        if attempt and run_dir is not None:
            shutil.rmtree(run_dir, ignore_errors=True)
        proc = run()
        if proc.returncode == 0 or GLOO_TEARDOWN_ABORT not in proc.stderr:
            return proc
    return proc


@pytest.mark.slow
@pytest.mark.serial  # alone: its three 2-rank gloo jobs pick rendezvous ports (the script's free_port())
def test_ddp_trainers_started_by_mp_spawn_get_the_ranks_fix_at_the_spawn_line(tmp_path):
    """Before: an mp.spawn DDP script got two warnings, one of them "mark the steps with
    mpsprofiler.step()" (useless in a main process that trains nothing), and a Hogwild fix
    naming no line. Now: one finding, naming the spawn's line, the spawned function and the
    ranks launch; the script changed as it says trains its ranks where mpsprof sees them."""
    run_dir = tmp_path / "spawn_ddp"
    proc = _gloo_run(lambda: mpsprof_cli("run", "--headless", "-o", str(run_dir), str(SCRIPTS / "spawn_ddp.py"),
                                         env=child_env(), timeout=180), run_dir)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = read_summary(run_dir)
    bare = _gloo_run(lambda: subprocess.run([sys.executable, str(SCRIPTS / "spawn_ddp.py")], capture_output=True,
                                            text=True, env=child_env(), timeout=180))
    losses = sorted(re.findall(r"rank \d loss [\d.]+", bare.stdout))
    assert len(losses) == 2 and sorted(re.findall(r"rank \d loss [\d.]+", proc.stdout)) == losses
    rules = [f["rule"] for f in summary["findings"]]
    assert "no-step-signal" not in rules and "no-step-signal" not in proc.stderr
    finding = next(f for f in summary["findings"] if f["rule"] == "unobserved-child-processes")
    fix = finding["fix"]
    spawn_line = _line_of_text("spawn_ddp.py", "mp.spawn(worker, args=(2, free_port()), nprocs=2, join=True)")
    assert f"# spawn_ddp.py:{spawn_line}: in place of `mp.spawn(worker, args=(2, free_port()), nprocs=2, join=True)`" in fix
    assert 'worker(int(os.environ["RANK"]), ...)' in fix and "mpsprof run --nproc-per-node N" in fix
    ranks_dir = tmp_path / "ranks"
    ranks = _gloo_run(lambda: mpsprof_cli("run", "--headless", "-o", str(ranks_dir), "--nproc-per-node", "2",
                                          str(SCRIPTS / "spawn_ddp.py"), env=child_env(), timeout=180), ranks_dir)
    assert ranks.returncode == 0, ranks.stderr[-3000:]
    assert sorted(re.findall(r"rank \d loss [\d.]+", ranks.stdout)) == losses  # the same losses, rank by rank
    ranked = read_summary(ranks_dir)
    assert ranked["steps"]["count"] == 30 and ranked["steps"]["mode"] == "optimizer"
    assert "unobserved-child-processes" not in {f["rule"] for f in ranked["findings"]}


def _line_of_text(script: str, text: str) -> int:
    lines = (SCRIPTS / script).read_text().splitlines()
    return next(i for i, line in enumerate(lines, 1) if line.strip() == text)


@pytest.mark.slow
def test_an_evaluation_only_script_counts_one_step_per_batch(tmp_path):
    """Before: 20 passes over 4 batches made 99 steps, 19 of them the gap between two
    passes (from the StopIteration to the next pass's first batch), ~0.2 ms each."""
    proc, summary, _ = mpsprof_run(tmp_path, "eval_passes.py")
    assert proc.stdout.count(" acc ") == 20
    assert summary["steps"]["mode"] == "dataloader"
    assert summary["steps"]["count"] == 80
    assert "no-step-signal" not in proc.stderr


@pytest.mark.slow
def test_a_pool_of_helpers_beside_a_main_process_that_trains_is_no_unobserved_training(tmp_path):
    """Before: a spawn Pool scoring the checkpoints the main process trained warned of
    "Training in 2 child processes was not observed" and told of Hogwild."""
    proc, summary, _ = mpsprof_run(tmp_path, "pool_scoring.py")
    assert "scored 3" in proc.stdout
    assert summary["steps"]["count"] == 30 and summary["steps"]["mode"] == "optimizer"
    assert "unobserved-child-processes" not in {f["rule"] for f in summary["findings"]}
    assert "child processes was not observed" not in proc.stderr


@pytest.mark.slow
def test_dataloader_workers_are_not_child_processes_of_the_script(tmp_path):
    run_dir = tmp_path / "run"
    proc = mpsprof_cli("run", "--headless", "-o", str(run_dir),
                       str(Path(__file__).parent.parent / "scripts_core" / "sleepy_dataset.py"),
                       env=child_env(WORKERS="2", STEPS="6", SLEEP="0.001"), timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "unobserved-child-processes" not in proc.stderr
    assert read_summary(run_dir)["steps"]["count"] == 6


@pytest.mark.slow
def test_per_sample_gradients_from_torch_func_are_no_steps_and_leave_the_loss_check_on(tmp_path):
    """DP-SGD with vmap(grad(...)) and 4 micro-batches summed into ``p.grad`` by hand: the
    engine's passes under torch.func made steps of the first update's micro-batches (24 of
    20), and the loss check's ``.item()`` on the per-sample loss under vmap raised, so it was
    switched off for the run (a probe fault)."""
    proc, summary, run_dir = mpsprof_run(tmp_path, "per_sample_grads.py")
    updates = int(re.search(r"optimizer steps (\d+)", proc.stdout).group(1))
    assert summary["steps"]["count"] == updates == 5, summary["steps"]
    assert summary["steps"]["mode"] == "optimizer"
    assert "switched off" not in proc.stderr, proc.stderr[-2000:]


@pytest.mark.slow
def test_inner_gradients_that_build_a_graph_are_no_steps(tmp_path):
    """MAML: 20 ``autograd.grad(..., create_graph=True)`` inner passes per meta-iteration, then
    one optimizer step. The first meta-iteration's inner passes, before any optimizer step,
    each closed a step (170 of 150 in a run of 150), and a step boundary inside a
    meta-iteration made its summed meta-loss a graph "kept across steps" (a false warning)."""
    proc, summary, _ = mpsprof_run(tmp_path, "maml_inner.py")
    updates = int(re.search(r"optimizer steps (\d+)", proc.stdout).group(1))
    assert summary["steps"]["count"] == updates == 40, summary["steps"]
    assert summary["steps"]["mode"] == "optimizer"
    assert "graph-kept-across-steps" not in {f["rule"] for f in summary["findings"]}, summary["findings"]


@pytest.mark.slow
@pytest.mark.parametrize("manual", ["0", "1"])
def test_a_gradcheck_before_training_makes_no_steps_and_no_float64_warning(tmp_path, manual):
    """``torch.autograd.gradcheck`` on a custom Function (the "Extending PyTorch" docs page's
    advice) before training: its ~100 ``autograd.grad`` passes, all before the first optimizer
    step, each closed a step (114 of 16, with an optimizer and without), and its float64
    inputs made "19 float64 ops per step: MPS has no float64" (a warning on a float32 loop)."""
    proc, summary, _ = mpsprof_run(tmp_path, "gradcheck_first.py", MANUAL=manual)
    updates = int(re.search(r"updates (\d+)", proc.stdout).group(1))
    assert summary["steps"]["count"] == updates == 16, summary["steps"]
    assert summary["steps"]["mode"] == ("backward" if manual == "1" else "optimizer")
    assert "float64-mps" not in {f["rule"] for f in summary["findings"]}, summary["findings"]


@pytest.mark.slow
@pytest.mark.parametrize("manual", ["0", "1"])
def test_a_baseline_validation_before_training_is_no_steps(tmp_path, manual):
    """The untrained model's validation over 90 batches, then 60 updates: past the 64 batches
    the probe holds before a first training signal, the validation's batches were confirmed
    as the steps of a loop without training and stayed steps (150 of 60; the sweep's
    script: 188 of 100). Now they count as fetched ahead and the training is numbered from 0."""
    proc, summary, _ = mpsprof_run(tmp_path, "baseline_eval.py", MANUAL=manual)
    updates = int(re.search(r"updates (\d+)", proc.stdout).group(1))
    val = int(re.search(r"over (\d+) batches", proc.stdout).group(1))
    assert val > 64, "the validation must outlast the probe's hold"
    assert summary["steps"]["count"] == updates == 60, summary["steps"]
    assert summary["steps"]["mode"] == ("backward" if manual == "1" else "optimizer")
    if manual == "0":  # (the count comes with the first optimizer step's model facts)
        assert summary["steps"]["fetched_ahead"] >= val - 1, summary["steps"]
