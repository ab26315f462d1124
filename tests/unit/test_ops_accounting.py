"""OpAccountant on real models, in-process on the CPU: what it records, that it never
changes results, and that it coexists with the user's own modes and hooks."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

from mpsprofiler import events as ev
from mpsprofiler.kernels.readiness import MpsKernelTable
from mpsprofiler.probe.modules import ModuleTracker
from mpsprofiler.probe.ops import OpAccountant
from ops_driver import (  # noqa: F401
    StepDriver,
    load_example,
    ops_events,
    private_cache,
    recorder,
    run_example,
    same_parameters,
)

CPU = torch.device("cpu")


@pytest.fixture(autouse=True)
def both_early_samples(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests read what a sample records, on the two forced early samples (steps 3
    and 5). The second is taken only while the first cost under ``EARLY_FREE_S`` (25 ms);
    a test script's sample costs 1-14 ms alone, but beside the other test worker on a
    2-core machine its CPU time once passed that (sync_heavy's per-parameter reads), and
    the test saw one sample. The cost rule has its own tests (test_ops_convergence.py)."""
    from mpsprofiler.probe import ops_schedule

    monkeypatch.setattr(ops_schedule, "EARLY_FREE_S", 1.0)


def _stack_len() -> int:
    return torch._C._len_torch_dispatch_stack()


def _nothing_left_installed() -> bool:
    from torch.nn.modules import module as mod

    return (
        _stack_len() == 0
        and "tolist" not in torch.Tensor.__dict__
        and "cpu" not in torch.Tensor.__dict__
        and getattr(torch.Tensor.__repr__, "__wrapped__", None) is None
        and not mod._global_forward_pre_hooks
        and not mod._global_forward_hooks
    )


def _ops_by_name(record: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for op in record["ops"]:
        out.setdefault(op["op"], []).append(op)
    return out


# --------------------------------------------------------------------------- what is recorded


def test_fallback_ops_attributed_to_their_modules() -> None:
    events, _ = run_example("fallback_ops", steps=7)
    records = ops_events(events)
    assert [r["step"] for r in records] == [3, 5]
    assert _nothing_left_installed()
    table = MpsKernelTable.load()
    expected = {
        "aten::multilabel_margin_loss_forward": "MultiLabelMarginLoss",
        "aten::multilabel_margin_loss_backward": "MultiLabelMarginLoss",
        "aten::_pdist_forward": "model.spread (SpreadPenalty)",
        "aten::_pdist_backward": "model.spread (SpreadPenalty)",
        "aten::adaptive_max_pool3d": "model.encoder.pool (AdaptiveMaxPool3d)",
        "aten::adaptive_max_pool3d_backward": "model.encoder.pool (AdaptiveMaxPool3d)",
    }
    for record in records:
        ops = _ops_by_name(record)
        for op, module in expected.items():
            assert op in ops, op
            assert [o["module"] for o in ops[op]] == [module]
            assert ops[op][0]["calls"] == 1
            assert ops[op][0]["devices"] == ["cpu"]
            assert table.status(op) == "cpu_fallback"
        forward = ops["aten::adaptive_max_pool3d"][0]
        assert forward["file"].endswith("fallback_ops.py") and forward["line"] > 0
        assert record["device_kind"] == "cpu" and record["model_device"] == "cpu"
        assert record["host_s"] > 0 and record["interval"] >= 1
        assert record["mps_kernel"] == [] and record["mismatch"] == []


def test_sync_heavy_item_per_parameter_and_exact_line() -> None:
    example = load_example("sync_heavy")
    source = Path(example.__file__).read_text().splitlines()
    line = next(i for i, text in enumerate(source, 1) if "param.grad.norm().item()" in text)
    events, model = run_example("sync_heavy", steps=7)
    n_params = len(list(model.parameters()))
    records = ops_events(events)
    assert [r["step"] for r in records] == [3, 5]
    for record in records:
        syncs = [s for s in record["syncs"] if s["line"] == line]
        assert len(syncs) == 1, record["syncs"]
        sync = syncs[0]
        assert sync["calls"] == n_params
        assert sync["kind"] == "item" and sync["op"] == "aten::_local_scalar_dense"
        assert sync["file"].endswith("sync_heavy.py")
        assert ".item()" in sync["code"] and sync["predicted"] is True
        assert sync["module"] == ""


def test_tolist_and_print_are_predicted_syncs() -> None:
    events, emit = recorder()
    # a CPU run (no model to tell): on a CUDA machine the default would be the GPU, where
    # CPU tensors are host data and rightly not syncs
    acct = OpAccountant(emit, early_steps=(1,), device_kind="cpu")
    weight = torch.randn(4, requires_grad=True)
    acct.on_step_boundary(0, None)
    acct.on_step_boundary(1, 0.01)
    x = (torch.randn(3, 4) * weight).detach()  # model-derived: on a Mac it lives on the GPU
    values = x.sum(0).tolist()  # line A
    text = repr(x)  # line B
    y = x.cpu()  # line C
    index = torch.randint(0, 3, (4,))  # host-side: stays on the CPU on a Mac
    picked = [int(i) for i in index] + index.tolist() + [torch.tensor(0.5).item()]
    acct.on_step_boundary(2, 0.01)
    acct.close()
    assert isinstance(values, list) and "tensor" in text and y is x and len(picked) == 9
    assert _nothing_left_installed()
    (record,) = ops_events(events)
    kinds = {s["kind"]: s for s in record["syncs"]}
    assert not [s for s in record["syncs"] if "index" in s["code"] or "picked" in s["code"]], record["syncs"]
    assert set(kinds) >= {"tolist", "print", "to_cpu"}
    assert kinds["tolist"]["code"] == "values = x.sum(0).tolist()  # line A"
    assert kinds["print"]["code"] == "text = repr(x)  # line B"
    assert kinds["to_cpu"]["code"] == "y = x.cpu()  # line C"
    assert all(s["predicted"] for s in record["syncs"])


def test_clean_model_has_no_predicted_fallback() -> None:
    events, _ = run_example("mps_clean", steps=6)
    table = MpsKernelTable.load()
    records = ops_events(events)
    assert [r["step"] for r in records] == [3, 5]
    for record in records:
        statuses = {o["op"]: table.status(o["op"]) for o in record["ops"]}
        assert "cpu_fallback" not in statuses.values(), statuses
        assert "unknown" not in statuses.values(), statuses


def test_float64_ops_counted_with_their_line() -> None:
    events, emit = recorder()
    acct = OpAccountant(emit, early_steps=(1,))
    lin = nn.Linear(4, 2).double()
    acct.on_step_boundary(1, None)
    out = lin(torch.randn(5, 4, dtype=torch.float64))  # the float64 line
    _ = out.float() * 2  # a conversion to float32 is the fix, not a float64 op
    acct.on_step_boundary(2, 0.01)
    (record,) = ops_events(events)
    assert record["float64"]["calls"] >= 2  # randn + addmm at least
    assert any(s["module"] == "Linear" for s in record["float64"]["sites"])
    assert any("the float64 line" in s["code"] for s in record["float64"]["sites"])
    assert not any(s["op"] == "aten::_to_copy" for s in record["float64"]["sites"])


def test_bf16_and_complex_counted() -> None:
    events, emit = recorder()
    acct = OpAccountant(emit, early_steps=(1,))
    acct.on_step_boundary(1, None)
    a = torch.ones(3, dtype=torch.bfloat16) * 2
    c = torch.ones(3, dtype=torch.complex64) + 1
    acct.on_step_boundary(2, 0.01)
    (record,) = ops_events(events)
    assert record["bf16_complex"]["bfloat16"] >= 2 and record["bf16_complex"]["complex"] >= 2
    assert a.dtype == torch.bfloat16 and c.dtype == torch.complex64


# --------------------------------------------------------------------------- never changes results


@pytest.mark.parametrize("name", ["fallback_ops", "sync_heavy", "ctc_gru"])
def test_results_bit_identical(name: str) -> None:
    _, bare = run_example(name, steps=6, seed=123, accountant=False)
    events, watched = run_example(name, steps=6, seed=123, every_step=True)
    assert len(ops_events(events)) >= 3
    assert same_parameters(bare, watched)
    assert _nothing_left_installed()


class CountingMode(TorchDispatchMode):
    """A user's own mode: counts ops and adds nothing."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        self.calls += 1
        return func(*args, **(kwargs or {}))


def _sgd_loop(steps: int, per_step_mode: CountingMode | None = None) -> nn.Module:
    torch.manual_seed(7)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(steps):
        x, y = torch.randn(4, 8), torch.randn(4, 2)
        if per_step_mode is not None:
            with per_step_mode:  # the boundary (optimizer step) happens inside the user's mode
                loss = nn.functional.mse_loss(model(x), y)
                opt.zero_grad()
                loss.backward()
                opt.step()
        else:
            loss = nn.functional.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
    return model


def test_coexists_with_user_mode_around_each_step() -> None:
    baseline_mode = CountingMode()
    bare = _sgd_loop(8, baseline_mode)
    events, emit = recorder()
    user_mode = CountingMode()
    with StepDriver(OpAccountant(emit, every_step=True)):
        watched = _sgd_loop(8, user_mode)
    assert user_mode.calls == baseline_mode.calls  # the user's mode saw every op, no extra
    assert same_parameters(bare, watched)
    assert len(ops_events(events)) >= 4
    assert all(r["ops"] for r in ops_events(events))
    assert _nothing_left_installed()


def test_coexists_with_user_mode_around_the_loop() -> None:
    baseline_mode = CountingMode()
    with baseline_mode:
        bare = _sgd_loop(8)
    events, emit = recorder()
    user_mode = CountingMode()
    with user_mode, StepDriver(OpAccountant(emit, every_step=True)):
        watched = _sgd_loop(8)
    assert user_mode.calls == baseline_mode.calls
    assert same_parameters(bare, watched)
    assert len(ops_events(events)) >= 4
    assert _nothing_left_installed()


def test_coexists_with_user_hooks() -> None:
    def run(with_accountant: bool) -> tuple[nn.Module, list[str]]:
        calls: list[str] = []
        torch.manual_seed(3)
        model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))
        model[0].register_forward_pre_hook(lambda m, a: calls.append("pre"))
        model[1].register_forward_hook(lambda m, a, out: out * 0.5)  # changes the output
        model.register_full_backward_hook(lambda m, gi, go: calls.append("bwd"))
        from torch.nn.modules import module as mod

        handle = mod.register_module_forward_hook(lambda m, a, out: calls.append(type(m).__name__))
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        events, emit = recorder()
        acct = OpAccountant(emit, every_step=True) if with_accountant else None
        try:
            for step in range(7):
                if acct:
                    acct.on_step_boundary(step, 0.01 if step else None)
                loss = model(torch.randn(4, 8, requires_grad=True)).pow(2).mean()
                opt.zero_grad()
                loss.backward()
                opt.step()
        finally:
            handle.remove()
            if acct:
                acct.close()
        if acct:
            assert ops_events(events)
        return model, calls

    bare, bare_calls = run(False)
    watched, watched_calls = run(True)
    assert same_parameters(bare, watched)
    assert bare_calls == watched_calls
    assert _nothing_left_installed()


# --------------------------------------------------------------------------- failure


def test_exception_in_bookkeeping_disables_with_one_probe_error() -> None:
    _, bare = run_example("ctc_gru", steps=9, seed=5, accountant=False)
    example = load_example("ctc_gru")
    events, emit = recorder()
    acct = OpAccountant(emit, every_step=True)
    real = acct._record
    count = {"n": 0}

    def flaky(*args: Any) -> None:
        count["n"] += 1
        if count["n"] == 40:
            raise RuntimeError("injected")
        real(*args)

    acct._record = flaky  # type: ignore[method-assign]
    torch.manual_seed(5)
    with StepDriver(acct):
        model = example.train(9, CPU)
    errors = [f for k, f in events if k == ev.KIND_PROBE_ERROR]
    assert [{k: v for k, v in e.items() if k != "where"} for e in errors] == [{"instrument": "ops", "message": "RuntimeError: injected"}]
    assert errors[0]["where"].startswith("mpsprofiler/probe/ops"), errors  # mpsprof's frame that called the fault
    assert acct.failed
    # the sampled step that failed is not emitted, later steps are not sampled
    assert [r["step"] for r in ops_events(events)] == []
    assert same_parameters(bare, model)
    assert _nothing_left_installed()


def test_exception_in_module_hook_disables_too() -> None:
    events, emit = recorder()
    acct = OpAccountant(emit, early_steps=(1, 2))
    model = nn.Linear(3, 3)

    def boom(module: nn.Module) -> str:
        raise ValueError("names")

    acct._tracker.name_of = boom  # type: ignore[method-assign]
    acct.on_step_boundary(1, None)
    out = model(torch.ones(1, 3))
    acct.on_step_boundary(2, 0.01)
    out2 = model(torch.ones(1, 3))
    acct.on_step_boundary(3, 0.01)
    assert torch.equal(out, out2)
    assert [f["message"] for k, f in events if k == ev.KIND_PROBE_ERROR] == ["ValueError: names"]
    assert not ops_events(events)
    assert _nothing_left_installed()


# --------------------------------------------------------------------------- MPS path, faked


def test_fake_mps_actual_fallbacks() -> None:
    table = MpsKernelTable.load()
    asked: list[str] = []

    def has_mps_kernel(op: str) -> bool:
        asked.append(op)
        return table.status(op) != "cpu_fallback"

    events, _ = run_example("fallback_ops", steps=6, device_kind="mps",
                                has_mps_kernel=has_mps_kernel, mps_device_type="cpu")  # fmt: skip
    records = ops_events(events)
    assert records
    for record in records:
        misses = {(m["op"], m["module"]) for m in record["mps_kernel"]}
        assert ("aten::multilabel_margin_loss_forward", "MultiLabelMarginLoss") in misses
        assert ("aten::_pdist_forward", "model.spread (SpreadPenalty)") in misses
        assert ("aten::adaptive_max_pool3d_backward", "model.encoder.pool (AdaptiveMaxPool3d)") in misses
        assert all(table.status(op) == "cpu_fallback" for op, _ in misses)
        assert record["device_kind"] == "mps"
    assert len(asked) == len(set(asked))  # cached per op


def _mac_dump(op: str, source: str) -> str:
    """``torch._C._dispatch_dump(op)`` as on a Mac: this torch's own dump of the op (the format
    of OperatorEntry::dumpState) with the MPS kernel's line a macOS build adds."""
    return (torch._C._dispatch_dump(op) + f"MPS: registered at /Users/runner/work/pytorch/pytorch/pytorch/{source}:84"
            " :: (Tensor _0, Tensor _1, float _2, float _3) -> Tensor _0 [ boxed ]\n")  # fmt: skip


def test_fake_mps_fallback_registrations_reported_even_with_a_kernel() -> None:
    """An MPS kernel registered from MPSFallback.mm is the CPU fallback (the op runs on the
    CPU whatever PYTORCH_ENABLE_MPS_FALLBACK says); one registered from the generated
    RegisterMPS.cpp is a kernel. Read from the dispatcher's record on a Mac, so a release that
    gave the op its kernel (col2im, PR #152282) is not told it falls back."""
    events, emit = recorder()
    sources = {"aten::embedding_renorm_": "aten/src/ATen/mps/MPSFallback.mm"}
    acct = OpAccountant(emit, device_kind="mps", has_mps_kernel=lambda op: True, mps_device_type="cpu",
                        dispatch_dump=lambda op: _mac_dump(op, sources.get(op, "build/aten/src/ATen/RegisterMPS_0.cpp")),
                        early_steps=(1,))  # fmt: skip
    emb = nn.Embedding(10, 4, max_norm=1.0)
    acct.on_step_boundary(1, None)
    emb(torch.tensor([1, 2, 3]))
    acct.on_step_boundary(2, 0.01)
    (record,) = ops_events(events)
    assert [m["op"] for m in record["mps_kernel"]] == ["aten::embedding_renorm_"]
    assert record["mps_kernel"][0]["module"] == "Embedding"


def test_mps_fallback_registration_is_read_from_the_dump() -> None:
    from mpsprofiler.kernels.readiness import registered_from_mps_fallback

    assert registered_from_mps_fallback(_mac_dump("aten::col2im", "aten/src/ATen/mps/MPSFallback.mm")) is True
    assert registered_from_mps_fallback(_mac_dump("aten::col2im", "build/aten/src/ATen/RegisterMPS_0.cpp")) is False
    assert registered_from_mps_fallback(torch._C._dispatch_dump("aten::col2im")) is None  # no MPS kernel here


@pytest.mark.parametrize("user_setting", [True, False])
def test_warn_always_restored(user_setting: bool) -> None:
    previous = torch.is_warn_always_enabled()
    torch.set_warn_always(user_setting)
    try:
        seen = []
        acct = OpAccountant(lambda k, **f: None, device_kind="mps", has_mps_kernel=lambda op: True,
                            mps_device_type="cpu", early_steps=(1,), warn_always=True)  # fmt: skip
        acct.on_step_boundary(1, None)
        seen.append(torch.is_warn_always_enabled())
        acct.on_step_boundary(2, 0.01)
        assert seen == [True]
        assert torch.is_warn_always_enabled() is user_setting
    finally:
        torch.set_warn_always(previous)


# --------------------------------------------------------------------------- placement


class _FakeParam:
    def __init__(self, device: str) -> None:
        self.device = torch.device(device)


class _FakeModule:
    def __init__(self, device: str) -> None:
        self._p = _FakeParam(device)

    def parameters(self, recurse: bool = True) -> Any:
        return iter([self._p])


def test_placement_mismatch_detected() -> None:
    tracker = ModuleTracker(lambda exc: None)
    tracker._check_placement(_FakeModule("cpu"), "head", (torch.ones(2),))  # type: ignore[arg-type]
    assert tracker.mismatches == {}
    tracker._check_placement(_FakeModule("mps:0"), "head", (torch.ones(2),))  # type: ignore[arg-type]
    assert tracker.mismatches == {"head": ("mps:0", "cpu")}


def test_module_names_nested_and_unregistered() -> None:
    class Inner(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = nn.Linear(2, 2)
            self.loose = [nn.ReLU()]  # not registered as a child

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.loose[0](self.lin(x))

    model = nn.Sequential(nn.Linear(2, 2), Inner())
    events, emit = recorder()
    acct = OpAccountant(emit, early_steps=(1,))
    acct.on_step_boundary(1, None)
    model(torch.ones(1, 2, requires_grad=True)).sum().backward()
    acct.on_step_boundary(2, 0.01)
    modules = {(o["op"], o["module"]) for o in ops_events(events)[0]["ops"]}
    # the model's paths start with "model" and name each module's type
    assert ("aten::addmm", "model.0 (Linear)") in modules and ("aten::addmm", "model.1.lin (Linear)") in modules
    assert ("aten::relu", "model.1.ReLU") in modules
    assert ("aten::threshold_backward", "model.1.ReLU") in modules  # backward, by autograd node
    assert ("aten::sum", "") in modules


# --------------------------------------------------------------------------- sampling policy


def test_adaptive_interval_keeps_within_budget() -> None:
    events, emit = recorder()
    acct = OpAccountant(emit, budget=0.02)
    base, extra = 0.010, 0.020  # a sampled step costs 3x an unsampled one
    total = added = 0.0
    sampled: list[int] = []
    last = None
    for step in range(3000):
        acct.on_step_boundary(step, last)
        is_sampled = acct._active_step == step
        if is_sampled:
            sampled.append(step)
        last = base + (extra if is_sampled else 0.0)
        total += last
        added += extra if is_sampled else 0.0
    acct.close()
    assert sampled[:2] == [3, 5]
    assert acct.interval >= 90  # ratio 2 / budget 0.02, less the sampled steps' own time
    # the steps between samples: the interval, lengthened by up to 9 steps to spread the
    # samples' phases (probe/sample_phase.py)
    assert all(b - a >= 90 for a, b in zip(sampled[2:], sampled[3:], strict=False)), sampled
    assert added / total <= 0.02 + 1e-9
    first = ops_events(events)[0]
    assert first["step"] == 3 and first["overhead_s"] is not None


def test_close_mid_sample_emits_partial() -> None:
    events, emit = recorder()
    acct = OpAccountant(emit, early_steps=(1,))
    acct.on_step_boundary(1, None)
    torch.ones(2) + 1
    acct.close()
    (record,) = ops_events(events)
    assert record["partial"] is True and record["step"] == 1
    assert _nothing_left_installed()


def test_boundary_is_cheap_when_not_sampling() -> None:
    acct = OpAccountant(lambda k, **f: None, early_steps=(), min_interval=10**9)
    acct._next_sample = 10**12
    n = 100_000
    start = time.perf_counter()
    for step in range(n):
        acct.on_step_boundary(step, 0.01)
    per_call = (time.perf_counter() - start) / n
    assert per_call < 3e-6, per_call


def test_overlong_sample_is_cut_at_the_next_module_call(monkeypatch: pytest.MonkeyPatch) -> None:
    import mpsprofiler.probe.ops as ops_mod

    monkeypatch.setattr(ops_mod, "MIN_SAMPLE_CAP_S", 0.0)
    monkeypatch.setattr(ops_mod, "UNKNOWN_STEP_CAP_S", 0.0)  # no plain step known at step 1
    events, emit = recorder()
    acct = OpAccountant(emit, early_steps=(1,))
    lin = nn.Linear(2, 2)
    acct.on_step_boundary(1, None)
    x = torch.ones(1, 2)
    for _ in range(300):  # no step boundary comes (an evaluation loop after training)
        x = x * 1.0
    assert torch._C._len_torch_dispatch_stack() == 1 and not acct._recording
    lin(x)  # the first module call removes the mode and the hooks
    assert _nothing_left_installed()
    acct.on_step_boundary(2, 1.0)
    (record,) = ops_events(events)
    assert record["truncated"] is True
    assert sum(o["calls"] for o in record["ops"]) == 256


def test_a_sample_cut_in_the_forward_pass_is_gone_before_the_backward_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    """A step of many tiny ops (a cell unrolled over time): the sample is cut at its cap,
    and with no module call after the cut, the backward hook's safe point removes the mode
    before the engine runs, so the backward pass's ops run bare (probe/safe_point.py)."""
    import mpsprofiler.probe.ops as ops_mod
    from mpsprofiler.probe import backward
    from mpsprofiler.probe.safe_point import SafePoint

    monkeypatch.setattr(ops_mod, "MIN_SAMPLE_CAP_S", 0.0)
    monkeypatch.setattr(ops_mod, "UNKNOWN_STEP_CAP_S", 0.0)
    safe = SafePoint()
    events, emit = recorder()
    acct = OpAccountant(emit, early_steps=(1,), safe_point=safe)
    passes: list[float] = []
    uninstall = backward.install(lambda site, start, end, reset: passes.append(end - start), time.perf_counter,
                                 lambda exc: pytest.fail(repr(exc)), safe_point=safe)
    try:
        w = torch.ones(2, requires_grad=True)
        acct.on_step_boundary(1, None)
        x = w
        for _ in range(300):  # functional ops only: no module call after the cut
            x = x * 1.0
        assert not acct._recording and safe.pending is not None and _stack_len() == 1
        x.sum().backward()
        assert _nothing_left_installed() and safe.pending is None
        assert passes and torch.equal(w.grad, torch.ones(2))
        acct.on_step_boundary(2, 0.01)
    finally:
        uninstall()
    (record,) = ops_events(events)
    assert record["truncated"] is True
    assert sum(o["calls"] for o in record["ops"]) == 256  # the forward's first 256, no backward op


def test_after_a_sample_cut_in_its_forward_pass_the_next_begins_at_the_backward_pass(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A step too long to sample whole is cut in its forward pass; the next sample begins at
    its step's backward pass (the backward hook's safe point, outside any op), so the ops the
    cut left unseen (the backward pass's) are recorded in the next, and a step with no
    backward pass leaves the armed sample for the next step."""
    import mpsprofiler.probe.ops as ops_mod
    from mpsprofiler.probe import backward
    from mpsprofiler.probe.safe_point import SafePoint

    monkeypatch.setattr(ops_mod, "MIN_SAMPLE_CAP_S", 0.0)
    monkeypatch.setattr(ops_mod, "UNKNOWN_STEP_CAP_S", 0.0)
    safe = SafePoint()
    events, emit = recorder()
    acct = OpAccountant(emit, early_steps=(1, 2), safe_point=safe)
    uninstall = backward.install(lambda site, start, end, reset: None, time.perf_counter,
                                 lambda exc: pytest.fail(repr(exc)), safe_point=safe)

    def step() -> None:
        x = w
        for _ in range(300):
            x = torch.sin(x)  # forward: sin; backward: cos and mul
        x.sum().backward()

    try:
        w = torch.ones(2, requires_grad=True)
        acct.on_step_boundary(1, None)
        step()  # cut after 256 forward ops, gone before the backward pass
        monkeypatch.setattr(ops_mod, "MIN_SAMPLE_CAP_S", 60.0)  # the next one is not cut
        acct.on_step_boundary(2, 0.01)
        assert acct._armed and _stack_len() == 0
        with torch.no_grad():
            torch.sin(w)  # an evaluation step: no backward pass, nothing sampled
        acct.on_step_boundary(3, 0.01)
        assert acct._armed and not [e for e in ops_events(events) if e["step"] == 2]
        step()
        acct.on_step_boundary(4, 0.01)
        assert _nothing_left_installed() and not acct._armed
    finally:
        uninstall()
    first, second = ops_events(events)
    assert first["step"] == 1 and first["truncated"] is True
    assert {o["op"] for o in first["ops"]} == {"aten::sin"}
    names = {o["op"] for o in second["ops"]}
    assert second["step"] == 3 and not second.get("truncated") and second.get("from_backward") is True
    assert "aten::cos" in names and "aten::sin" not in names, names


def test_a_run_that_ends_while_a_sample_waits_for_its_backward_pass_says_nothing_of_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import mpsprofiler.probe.ops as ops_mod
    from mpsprofiler.probe.safe_point import SafePoint

    monkeypatch.setattr(ops_mod, "MIN_SAMPLE_CAP_S", 0.0)
    monkeypatch.setattr(ops_mod, "UNKNOWN_STEP_CAP_S", 0.0)
    safe = SafePoint()
    events, emit = recorder()
    acct = OpAccountant(emit, early_steps=(1, 2), safe_point=safe)
    acct.on_step_boundary(1, None)
    x = torch.ones(2)
    for _ in range(300):
        x = torch.sin(x)  # cut in its forward pass (no backward pass at all)
    acct.on_step_boundary(2, 0.01)
    assert acct._armed and _nothing_left_installed()
    acct.close()  # the script ends: the armed step's backward pass never comes
    assert not acct._armed and safe.pending is None and _nothing_left_installed()
    assert [e["step"] for e in ops_events(events)] == [1]


def test_a_pending_change_runs_on_its_own_thread_only() -> None:
    import threading

    from mpsprofiler.probe.safe_point import SafePoint

    ran: list[str] = []
    errors: list[BaseException] = []
    safe = SafePoint()
    safe.set(lambda: ran.append(threading.current_thread().name), errors.append)
    other = threading.Thread(target=safe.run, name="other")
    other.start()
    other.join()
    assert ran == [] and safe.pending is not None  # another thread's dispatch stack is not ours
    safe.run()
    assert ran == [threading.current_thread().name] and safe.pending is None
    safe.run()
    assert len(ran) == 1

    def broken() -> None:
        raise RuntimeError("teardown failed")

    safe.set(broken, errors.append)
    safe.run()
    assert [str(e) for e in errors] == ["teardown failed"] and safe.pending is None


def test_no_module_hooks_when_torch_compile_is_in_use(monkeypatch: pytest.MonkeyPatch) -> None:
    from torch.nn.modules import module as mod

    import mpsprofiler.probe.ops as ops_mod

    monkeypatch.setattr(ops_mod, "dynamo_used", lambda: True)
    events, emit = recorder()
    acct = OpAccountant(emit, early_steps=(1,))
    acct.on_step_boundary(1, None)
    assert not mod._global_forward_hooks
    nn.Linear(2, 2)(torch.ones(1, 2))
    acct.on_step_boundary(2, 0.01)
    (record,) = ops_events(events)
    assert {o["module"] for o in record["ops"]} == {""}
    assert "aten::addmm" in {o["op"] for o in record["ops"]}


def test_forked_child_drops_the_mode() -> None:
    import os

    _, emit = recorder()
    acct = OpAccountant(emit, early_steps=(1,))
    acct.on_step_boundary(1, None)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: what a DataLoader worker would see
        ok = _nothing_left_installed() and not acct._recording
        os.write(write, b"1" if ok else b"0")
        os._exit(0)
    os.waitpid(pid, 0)
    assert os.read(read, 1) == b"1"
    assert _stack_len() == 1  # the parent keeps sampling
    acct.close()
    assert _nothing_left_installed()


# --------------------------------------------------------------------------- a real accelerator

cuda_only = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


@pytest.mark.gpu
@cuda_only
def test_cuda_actual_syncs() -> None:
    events, emit = recorder()
    acct = OpAccountant(emit, early_steps=(1,))
    model = nn.Linear(4, 4).cuda()
    x = torch.randn(3, 4, device="cuda")
    host = torch.randn(3)  # a CPU tensor: no sync on a GPU run
    acct.on_step_boundary(1, None)
    y = model(x)
    a = y.sum().item()  # sync: item
    b = y.cpu()  # sync: to_cpu (Tensor.cpu)
    c = y.to("cpu")  # sync: to_cpu (_to_copy)
    d = y[0].tolist()  # sync: tolist, its inner copy not counted twice
    e = y.to("cpu", non_blocking=True)  # no sync
    f = host.sum().item() + len(host.tolist())  # CPU tensors: nothing to wait for
    acct.on_step_boundary(2, 0.01)
    torch.cuda.synchronize()
    assert isinstance(a, float) and b.device.type == c.device.type == e.device.type == "cpu"
    assert len(d) == 4 and f
    (record,) = ops_events(events)
    assert record["device_kind"] == "cuda" and record["model_device"] == "cuda:0"
    by_code = {s["code"].split("#")[0].strip(): s for s in record["syncs"]}
    assert set(by_code) == {"a = y.sum().item()", "b = y.cpu()", "c = y.to(\"cpu\")", "d = y[0].tolist()"}
    assert by_code["a = y.sum().item()"]["kind"] == "item"
    assert by_code["b = y.cpu()"]["kind"] == "to_cpu" and by_code["d = y[0].tolist()"]["kind"] == "tolist"
    assert all(s["calls"] == 1 and "predicted" not in s and s["device"] == "cuda" for s in record["syncs"])
    assert _nothing_left_installed()


class _MixedModel(nn.Module):
    """A GPU model with an embedding left on the CPU and a parameter forgotten there."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(100, 8)
        self.body = nn.Linear(8, 8)
        self.scale = _Scale()

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        device = self.body.weight.device
        h = self.emb(tokens.cpu()).to(device)
        return self.scale(self.body(h))


class _Scale(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.ones(8))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.w.to(x.device)


@pytest.mark.gpu
@cuda_only
def test_cuda_layer_on_cpu() -> None:
    from mpsprofiler.diagnosis.analyzers.ops import ops_facts
    from mpsprofiler.session.ops import OpStats

    model = _MixedModel()
    model.body.cuda()
    model.body2 = nn.Linear(8, 8).cuda()  # more parameters on the GPU than on the CPU
    model.body3 = nn.Linear(8, 800).cuda()
    events, emit = recorder()
    acct = OpAccountant(emit, early_steps=(1,))
    acct.on_step_boundary(1, None)
    model(torch.randint(0, 100, (4, 3), device="cuda")).sum().backward()
    acct.on_step_boundary(2, 0.01)
    (record,) = ops_events(events)
    assert record["model_device"] == "cuda:0"
    assert record["mismatch"] == [{"module": "model.scale (_Scale)", "param_device": "cpu", "input_device": "cuda:0"}]
    stats = OpStats()
    stats.feed(record)
    facts = ops_facts(stats, "cuda")
    assert facts["layer_on_cpu_module"] == "model.scale (_Scale)" and facts["layer_on_cpu_device"] == "cuda:0"
    emb_ops = [o for o in record["ops"] if o["module"] == "model.emb (Embedding)"]
    assert emb_ops and all(o["devices"] == ["cpu"] for o in emb_ops)


@pytest.mark.gpu
@cuda_only
def test_cuda_results_bit_identical_and_predictions() -> None:
    from mpsprofiler.diagnosis.analyzers.ops import ops_facts
    from mpsprofiler.session.ops import OpStats

    example = load_example("sync_heavy")
    cuda = torch.device("cuda")
    runs = []
    for watched in (False, False, True):
        torch.manual_seed(11)
        events, emit = recorder()
        if watched:
            with StepDriver(OpAccountant(emit, every_step=True)):
                runs.append(example.train(8, cuda))
        else:
            runs.append(example.train(8, cuda))
    if not same_parameters(runs[0], runs[1]):
        pytest.skip("this GPU is not deterministic for the example")
    assert same_parameters(runs[0], runs[2])
    records = ops_events(events)
    per_record = [(r["step"], sum(s["calls"] for s in r["syncs"]), r.get("partial")) for r in records]
    # six .item() per step; after the last optimizer step only the final print's sync runs
    assert all(n == 6 for _, n, partial in per_record if not partial), per_record
    assert [n for _, n, partial in per_record if partial] in ([], [1]), per_record

    example = load_example("fallback_ops")
    events, emit = recorder()
    torch.manual_seed(1)
    with StepDriver(OpAccountant(emit)):
        example.train(7, cuda)
    stats = OpStats()
    for record in ops_events(events):
        stats.feed(record)
    facts = ops_facts(stats, "cuda")
    assert {"aten::_pdist_forward", "aten::adaptive_max_pool3d"} <= set(facts["mps_predicted_fallback_ops"])
    assert any("multilabel_margin_loss" in op for op in facts["mps_predicted_fallback_ops"])


def test_backward_ops_paired_with_forward_when_nodes_are_not_mapped(monkeypatch: pytest.MonkeyPatch) -> None:
    # some torch releases build graphs the node walk cannot follow (CTC loss on torch 2.11)
    monkeypatch.setattr(ModuleTracker, "_map_nodes", lambda self, path, seq, output: None)
    events, _ = run_example("fallback_ops", steps=4)
    (record,) = ops_events(events)
    modules = {o["op"]: o["module"] for o in record["ops"]}
    assert modules["aten::multilabel_margin_loss_backward"] == "MultiLabelMarginLoss"
    assert modules["aten::_pdist_backward"] == "model.spread (SpreadPenalty)"
    assert modules["aten::adaptive_max_pool3d_backward"] == "model.encoder.pool (AdaptiveMaxPool3d)"


def test_optimizer_bookkeeping_is_not_a_predicted_sync() -> None:
    # Adam reads its CPU step counters with .item(): on a Mac they stay on the CPU too
    events, _ = run_example("ctc_gru", steps=7)
    records = ops_events(events)
    # ~3,900 ops a step: only the first early sample is forced (ops_schedule.EARLY_FREE_OPS)
    assert [r["step"] for r in records] == [3]
    for record in records:
        assert record["syncs"] == [], record["syncs"]


class _ScalarDataset(torch.utils.data.Dataset):
    """A Dataset reading CPU scalars while it builds samples (labels via int(tensor))."""

    def __len__(self) -> int:
        return 64

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        g = torch.Generator().manual_seed(i)
        return torch.randn(4, generator=g), int(torch.randint(0, 2, (1,), generator=g))


def test_dataset_scalars_are_not_predicted_syncs_but_the_loop_is() -> None:
    """Data loading stays on the CPU on a Mac; ``loss.item()`` in the loop would sync."""
    events, emit = recorder()
    accountant = OpAccountant(emit, early_steps=(1, 2, 3), min_interval=1, every_step=True)
    model = nn.Linear(4, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = torch.utils.data.DataLoader(_ScalarDataset(), batch_size=8)
    with StepDriver(accountant):
        for x, y in loader:
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            loss.item()
    accountant.close()
    syncs = [s for r in ops_events(events) for s in r["syncs"]]
    assert syncs, "the loop's loss.item() is a predicted sync"
    assert all(s["line"] != _ScalarDataset.__getitem__.__code__.co_firstlineno + 2 for s in syncs), syncs
    assert {s["code"] for s in syncs} == {"loss.item()"}


def test_a_cut_sample_and_the_backward_pass_after_it_count_as_one_step() -> None:
    """Per-step figures divide by whole steps: a sample cut in its forward pass and the one
    that began at the next step's backward pass hold one step's ops between them."""
    from mpsprofiler.session.ops import OpStats

    stats = OpStats()
    op = {"op": "aten::sin", "module": "", "calls": 256, "host_s": 0.01}
    stats.feed({"step": 3, "truncated": True, "ops": [op]})  # type: ignore[typeddict-item]
    stats.feed({"step": 40, "from_backward": True, "ops": [{**op, "op": "aten::cos", "calls": 300}]})  # type: ignore[typeddict-item]
    assert stats.sampled_steps == 1 and stats.per_step(556) == 556
    assert stats.first_step == 3 and stats.last_step == 40


def test_a_cut_sample_makes_its_sync_count_a_lower_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    """A step that reads 2,000 values back (``.item()`` in a print loop) sampled under a
    time cap it passes: the sample is cut (``truncated``) and counts only the reads before
    the cut. The sync rules then say "at least N" and why, not N (an unseen script read
    5,000 a step and was told 3,584)."""
    from mpsprofiler.diagnosis.analyzers.ops import ops_facts
    from mpsprofiler.diagnosis.engine import with_phrases
    from mpsprofiler.diagnosis.rules import builtin_rules_dir, parse_rules_text
    from mpsprofiler.probe import ops as ops_module
    from mpsprofiler.session.ops import OpStats

    monkeypatch.setattr(ops_module, "MIN_SAMPLE_CAP_S", 0.0)
    w = torch.zeros(4, requires_grad=True)
    opt = torch.optim.SGD([w], lr=0.1)

    def counts(cap_step_s: float) -> tuple[dict[str, Any], int]:
        events, emit = recorder()
        acct = OpAccountant(emit, early_steps=(1,))
        for step in range(3):
            acct.on_step_boundary(step, None if step == 0 else cap_step_s)
            loss = ((w - 1) ** 2).sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
            for _ in range(2_000):
                w[0].item()
        acct.close()
        records = ops_events(events)
        stats = OpStats()
        for record in records:
            stats.feed(record)
        return ops_facts(stats, "cpu"), sum(1 for r in records if r.get("truncated"))

    whole, cut = counts(10.0)  # a cap of 20 s: never reached
    assert cut == 0 and whole["syncs_counted"] == "all" and whole["syncs_per_step"] >= 2_000, whole["syncs_per_step"]
    facts, cut = counts(1e-6)  # a cap of 2 µs: cut at the first check (every 256 ops)
    assert cut == 1 and facts["syncs_counted"] == "at_least" and facts["syncs_per_step"] < 2_000, facts["syncs_per_step"]
    rules, _ = parse_rules_text((builtin_rules_dir() / "ops.yaml").read_bytes())
    mac = next(r for r in rules if r.id == "sync-heavy-mac")
    words = with_phrases(mac, {**facts, "sync_top_via_where": "none", "sync_fix_where": "plain", "sync_checks": "none"})
    assert mac.title_template.render(words).startswith("On a Mac GPU this loop would sync at least "), words
    whole_words = with_phrases(mac, {**whole, "sync_top_via_where": "none"})
    assert "at least" not in mac.title_template.render(whole_words)
