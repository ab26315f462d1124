"""torch.compile under mpsprof behaves as under plain python (issue 14, item 1), and torch's
own warnings raised inside the probe's wrappers keep torch's location (item 9).

Compiled scripts run through the real CLI next to plain python: same exit status, stdout
and stderr byte for byte. Each script changes what Dynamo must compile on step 3, the step
the op sampler always samples first, and the test checks that step was sampled, so a probe
visible to Dynamo (global module hooks, their handles) cannot go unnoticed.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn

from helpers import Result, assert_same, child_env, compare, read_events, read_summary, run_mpsprof, run_python

COMPILE_SCRIPTS = Path(__file__).resolve().parent.parent / "scripts_compile"
MAC_FALSE_ALARMS = {"mps-readiness", "sync-heavy-mac", "sync-heavy"}  # as tests/e2e/test_mac_predictions.py

CASES = {
    # the one-shot step-0 hook was traced: Unsupported ... RemovableHandle
    "fullgraph-function": ["compiled_function.py", "eager"],
    # the sampler's module hooks were traced on a recompile: ... tracked for mutation
    "fullgraph-model": ["compiled_model.py", "aot_eager", "--fullgraph"],
    # OptimizedModule warned about global hooks: fatal under simplefilter("error")
    "strict-warnings": ["compiled_model.py", "eager", "--warnings-error"],
    # Dynamo inlined the global optimizer hooks into a compiled optimizer step
    "compiled-optimizer-step": ["compiled_optimizer.py", "eager"],
}


def _sampled_steps(run_dir: Path) -> set[int]:
    return {e["step"] for e in read_events(run_dir) if e["k"] == "ops"}


def _notes(run_dir: Path) -> list[dict]:
    return [e for e in read_events(run_dir) if e["k"] == "probe_error"]


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES)
def test_compiled_training_runs_as_under_python(tmp_path: Path, case: str) -> None:
    script, *args = CASES[case]
    plain, profiled = compare([str(COMPILE_SCRIPTS / script), *args], tmp_path / "run", timeout=400)
    assert plain.returncode == 0 and b"step 6: loss" in plain.stdout
    # the recompile ran under the sampler (step 3; its compile makes the sample look costly,
    # so step 5 waits for the budget: probe/ops_schedule.py, EARLY_FREE_S)
    assert 3 in _sampled_steps(tmp_path / "run")
    (note,) = _notes(tmp_path / "run")  # said once, in the run, never on the script's stderr
    assert note["instrument"] == "ops modules" and "torch.compile" in note["message"]


@pytest.fixture(scope="module")
def nanogpt(tmp_path_factory: pytest.TempPathFactory) -> tuple[Result, Result, Path]:
    """nanoGPT's train.py with --compile=True (inductor), in miniature: under mpsprof first,
    with an inductor cache of its own that is empty (inductor generates and builds every
    kernel under the probe, as on a first run), then under plain python, which finds the
    same kernels in that cache (byte-identical losses: it is the compile, not the numerics,
    that is cached; it takes under half the time of a second cold compile, measured on 2 cores)."""
    base = tmp_path_factory.mktemp("nanogpt")
    env = child_env(TORCHINDUCTOR_CACHE_DIR=str(base / "inductor_cache"))
    args = [str(COMPILE_SCRIPTS / "nanogpt_compile.py")]
    profiled = run_mpsprof(args, base / "run", env=env, timeout=580)
    plain = run_python(args, env=env, timeout=580)
    return plain, profiled, base / "run"


@pytest.mark.slow
def test_nanogpt_style_compiled_training(nanogpt: tuple[Result, Result, Path]) -> None:
    """The model user: nanoGPT's train.py with --compile=True (inductor), in miniature."""
    plain, profiled, run_dir = nanogpt
    assert_same(plain, profiled)
    assert plain.returncode == 0 and b"iter 7: loss" in plain.stdout
    assert {3, 5} <= _sampled_steps(run_dir)


@pytest.mark.slow
def test_nanogpt_compiled_gets_no_mac_false_alarm(nanogpt: tuple[Result, Result, Path]) -> None:
    """Issue 17's nanoGPT with compile (was tests/e2e/test_mac_predictions.py's own compiled run
    of its nanoGPT): the compiled steps' CPU kernels (flash attention for CPU among them,
    once predicted as an MPS fallback) are no MPS-readiness or Mac sync alarm."""
    from mpsprofiler.session.recording import load_run

    _, profiled, run_dir = nanogpt
    assert profiled.returncode == 0, profiled.stderr[-3000:]
    findings = read_summary(run_dir)["findings"]
    assert not MAC_FALSE_ALARMS & {f["rule"] for f in findings}, findings
    ops = load_run(run_dir).session.ops.to_dict()
    assert "aten::_scaled_dot_product_flash_attention_for_cpu" in {o["op"] for o in ops["ops"]}  # sampled, compiled
    assert ops["mps_predicted"] == [], ops["mps_predicted"]


@pytest.mark.slow
def test_torch_warnings_in_dataloader_keep_their_location(tmp_path: Path) -> None:
    """pin_memory without an accelerator warns from the iterator's __init__, a wrong
    IterableDataset length from __next__: both name torch's caller, as under python."""
    plain, _ = compare([str(COMPILE_SCRIPTS / "loader_warnings.py")], tmp_path / "run")
    assert b"pin_memory" in plain.stderr and b"Length of IterableDataset" in plain.stderr


# -- in-process (fast): the pieces the CLI tests above go through -------------------------
def _global_hooks() -> int:
    from torch.nn.modules import module as mod

    return len(mod._global_forward_pre_hooks) + len(mod._global_forward_hooks)


@pytest.mark.slow  # imports Dynamo and compiles (eager backend): seconds
def test_torch_compile_call_removes_every_global_hook_before_dynamo_looks(monkeypatch: pytest.MonkeyPatch) -> None:
    import mpsprofiler.probe.ops as ops_mod
    from mpsprofiler.probe.probe import Probe

    monkeypatch.setattr(ops_mod, "dynamo_used", lambda: False)  # whatever ran earlier in this process

    before = _global_hooks()
    original = torch.compile
    probe = Probe(None)
    probe._on_torch_imported()
    try:
        assert torch.compile is not original and torch.compile.__wrapped__ is original
        assert _global_hooks() == before + 1  # the one-shot step-0 marker
        acct = probe.ops
        acct.on_step_boundary(3, 0.01)  # a sample starts: module hooks too
        assert _global_hooks() == before + 3
        lin = nn.Linear(4, 4)
        fn = torch.compile(lambda x: lin(x).sum(), fullgraph=True, backend="eager")
        assert _global_hooks() == before  # gone at the call, before any tracing
        assert fn(torch.ones(2, 4)).shape == ()
        acct.on_step_boundary(4, 0.01)
        acct.on_step_boundary(5, 0.01)
        assert _global_hooks() == before  # and never installed again
        assert probe.tracker._started
    finally:
        probe.close()
        for undo in probe._uninstallers:
            undo()
    assert torch.compile is original and _global_hooks() == before


def test_old_torch_switches_op_accounting_off_when_compile_is_used(monkeypatch: pytest.MonkeyPatch) -> None:
    """Before torch 2.9 Dynamo would not compile under the sampler's mode (eager numerics)."""
    import mpsprofiler.probe.ops as ops_mod
    from mpsprofiler.probe.ops import OpAccountant

    monkeypatch.setattr(ops_mod, "_compile_ignores_mode", lambda: False)
    monkeypatch.setattr(ops_mod, "dynamo_used", lambda: False)
    events: list[tuple[str, dict]] = []
    acct = OpAccountant(lambda kind, **fields: events.append((kind, fields)), early_steps=(1, 2))
    stack, hooks = torch._C._len_torch_dispatch_stack(), _global_hooks()
    acct.on_step_boundary(1, None)
    assert torch._C._len_torch_dispatch_stack() == stack + 1 and _global_hooks() == hooks + 2
    acct.compile_in_use()  # the script calls torch.compile in the middle of a sample
    assert torch._C._len_torch_dispatch_stack() == stack and _global_hooks() == hooks
    acct.on_step_boundary(2, 0.01)
    acct.close()
    assert torch._C._len_torch_dispatch_stack() == stack
    assert [kind for kind, _ in events] == ["probe_error"]
    assert events[0][1]["instrument"] == "ops" and "ignore_compile_internals" in events[0][1]["message"]


@pytest.mark.slow
def test_sampling_never_loads_dynamo_into_a_script_that_does_not(tmp_path: Path) -> None:
    """torch wraps every dispatch mode's __torch_dispatch__ so that its first call imports
    torch._dynamo: seconds inside a sampled step, and a false long-warmup finding."""
    run_dir = tmp_path / "run"
    plain, _ = compare([str(COMPILE_SCRIPTS / "manual_updates_no_dynamo.py")], run_dir)
    assert b"dynamo loaded: False" in plain.stdout  # and the same under mpsprof (compare)
    assert 3 in _sampled_steps(run_dir)
    summary = read_summary(run_dir)
    assert "long-warmup" not in {f["rule"] for f in summary["findings"]}


@pytest.mark.slow
def test_a_checkpointed_compiled_block_trains_as_under_python(tmp_path: Path) -> None:
    """Activation checkpointing inside a compiled model: its backward recomputes the block
    through the higher-order operator ``run_and_save_rng_state``. In the first sampled step
    torch raised in the user's step ("There was no rule registered for HigherOrderOperator
    run_and_save_rng_state and mode OpMode"): the run crashed at step 3 and mpsprof reported
    the crash as the script's. Now the mode runs higher-order operators untouched."""
    plain, profiled = compare([str(COMPILE_SCRIPTS / "checkpointed_attention.py")], tmp_path / "run", timeout=400)
    assert plain.returncode == 0 and b"step 5: loss" in plain.stdout, plain.stderr[-2000:]
    assert 3 in _sampled_steps(tmp_path / "run")
    assert "crash" not in {f["rule"] for f in read_summary(tmp_path / "run")["findings"]}
