"""The shortcuts that make a sampled step cheaper (issues 28 and 34) name the same lines
and modules as the long way: the kept caller frame of FrameFinder, the leak tracker's
skipping of in-place outputs, and the module tracker's sequence ranges."""

from __future__ import annotations

import functools
import sys
from typing import Any

import torch
from torch import nn

from mpsprofiler.probe.ops import OpAccountant
from mpsprofiler.probe.ops_leaks import LeakTracker
from mpsprofiler.probe.ops_sites import FrameFinder
from ops_driver import StepDriver, ops_events, recorder


def _lib(ask: Any) -> Any:
    """Stands for library code (its kind is set by each test): it asks from inside."""
    return ask()


def _lib_gen(ask: Any) -> Any:
    while True:
        yield ask()


def _here() -> int:
    return sys._getframe(1).f_lineno


def _finder(kind: int) -> FrameFinder:
    finder = FrameFinder()
    finder._kind[_lib.__code__] = kind
    finder._kind[_lib_gen.__code__] = kind
    return finder


def test_user_site_of_a_library_caller_is_its_callers_line_each_time() -> None:
    for kind in (0, 1, 3):  # torch, a library, torch's internal bookkeeping
        finder = _finder(kind)
        ask = functools.partial(finder.user_site, 1)  # no frame of its own: depth 1 is _lib
        first, line1 = _lib(ask), _here()
        again = _lib(ask)  # a new frame of _lib, from another line: not the kept one
        line2 = _here() - 1
        assert first == (__file__, line1)
        assert again == (__file__, line2)


def test_kept_frame_answers_for_its_own_calls_and_is_dropped_by_forget() -> None:
    finder = _finder(0)
    answers = []

    def ask() -> Any:
        answers.append(finder.user_site(2))
        kept = finder._last_frame
        answers.append(finder.user_site(2))  # the same caller frame: the kept answer
        assert finder._last_frame is kept is not None
        return kept

    line = _here() + 1
    _lib(ask)
    assert answers == [(__file__, line)] * 2
    finder.forget()
    assert finder._last_frame is None


def test_a_library_generator_is_never_kept() -> None:
    # a generator frame resumes from any caller: its answer is found again each time
    finder = _finder(0)
    gen = _lib_gen(lambda: finder.user_site(2))
    first, line1 = next(gen), _here()
    second, line2 = next(gen), _here()
    assert first == (__file__, line1) and second == (__file__, line2)
    assert finder._last_frame is None


def test_find_is_kept_for_torch_callers_only() -> None:
    for kind, kept in ((0, True), (3, True), (1, False)):
        finder = _finder(kind)
        line = _here() + 1
        site, printing, internal, via = _lib(functools.partial(finder.find, 1))
        assert site == (__file__, line) and not printing
        assert internal == (kind == 3)
        # the library frame the call came through inside the user's line (a framework's own
        # call, as a Trainer's loss check inside `trainer.train()`); torch's frames are not one
        assert (via is not None and via[0] == _lib.__code__.co_filename and via[2] == "_lib") == (kind == 1)
        assert (finder._last_frame is not None) == kept
        finder.forget()


def test_find_of_a_library_caller_without_user_frame_is_the_library_line() -> None:
    finder = _finder(1)
    # every frame from the test runner up is "library" for this finder
    frame: Any = sys._getframe(0)
    while frame is not None:
        finder._kind[frame.f_code] = 1
        frame = frame.f_back

    def ask() -> Any:
        return finder.find(2), sys._getframe(1).f_lineno

    (site, _, _, via), lib_line = _lib(ask)
    assert site == (_lib.__code__.co_filename, lib_line)
    assert via is None  # no user line above it: the library line is the site itself


def test_leak_tracker_skips_in_place_outputs_without_a_walk() -> None:
    asked = []

    class Finder:
        def leak_site(self, depth: int) -> Any:
            asked.append(depth)
            return False, ("train.py", 7)

        def forget(self) -> None:
            pass

    leaks = LeakTracker(lambda: Finder())  # type: ignore[arg-type, return-value]
    leaks.begin(3)
    a, b = torch.ones(2), torch.ones(2)
    leaks.on_op("aten::add_.Tensor", "", [a, b, a], 2, None, False)  # in place: a is an input
    assert asked == [] and leaks._current is not None and leaks._current.refs == []
    c = a + b
    leaks.on_op("aten::add.Tensor", "", [a, b, c], 2, None, False)
    assert asked == [3]
    (ref, key), = leaks._current.refs
    assert ref() is c and key == ("train.py", 7, "", "aten::add.Tensor")
    d, e = torch.ones(1), torch.ones(1)
    leaks.on_op("aten::split", "model.0 (Linear)", [a, d, a, e], 1, ("m.py", 3), False)  # two outputs, one an input
    made = [r() for r, _ in leaks._current.refs[1:]]
    assert len(made) == 2 and made[0] is d and made[1] is e
    assert asked == [3]  # a module's op: its site is the module's line, no walk
    leaks.end(3)


class _Inner(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lin(x)


class _Outer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inner = _Inner()
        self.scale = nn.Parameter(torch.ones(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.tanh(x * self.scale)  # before the inner module: the outer module's node
        z = self.inner(y)
        aside = torch.exp(y)  # made here, not part of the output until below
        return torch.sigmoid(z) + aside.sum()


def test_backward_ops_belong_to_the_module_whose_forward_made_their_nodes() -> None:
    events, emit = recorder()
    torch.manual_seed(0)
    model = _Outer()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(3, 4)
    with StepDriver(OpAccountant(emit, early_steps=(3,), device_kind="cpu")):
        for _ in range(5):
            loss = model(x).square().mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
    (record,) = ops_events(events)
    modules: dict[str, set[str]] = {}
    for op in record["ops"]:
        modules.setdefault(op["op"], set()).add(op["module"])
    outer = "model (_Outer)"
    assert modules["aten::tanh_backward"] == {outer}
    assert modules["aten::sigmoid_backward"] == {outer}
    assert modules["aten::mm"] == {"model.inner.lin (Linear)"}  # the Linear's gradients


def test_op_info_is_keyed_by_the_op_object() -> None:
    events, emit = recorder()
    acct = OpAccountant(emit, early_steps=(1,), device_kind="cpu")
    model = nn.Linear(2, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with StepDriver(acct):
        for _ in range(3):
            model(torch.ones(1, 2)).sum().backward()
            opt.step()
    assert acct._info
    for key, (info, func) in acct._info.items():
        assert key == id(func)  # the entry holds the op: its id is not reused meanwhile
        assert info == () or info[0] == func.name()


def test_site_is_finds_site_without_the_loader_question() -> None:
    for kind in (0, 1, 3, 4):  # torch, a library, torch's bookkeeping, a device optimizer
        finder, other = _finder(kind), _finder(kind)
        site = _lib(functools.partial(finder.site, 1))
        line = _here() - 1
        again = _lib(functools.partial(finder.site, 1))  # another caller frame, another line
        line2 = _here() - 1
        expected = _lib(functools.partial(other.find, 1))[0]
        if kind == 4:  # the optimizer's own line, as find says
            assert site == expected and site is not None and site[0] == _lib.__code__.co_filename
        else:
            assert (site, again) == ((__file__, line), (__file__, line2))
            assert expected is not None and expected[0] == __file__


def test_model_derived_tensors_are_followed_on_a_cpu_run_only() -> None:
    # an accelerator run's CPU tensors stay on the CPU on a Mac too: their syncs are dropped
    # from its events, so which CPU tensors come from the model is not followed there
    carried = {}
    for kind in (None, "cuda"):
        events, emit = recorder()
        acct = OpAccountant(emit, early_steps=(2,), device_kind=kind)
        model = nn.Linear(3, 3)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        with StepDriver(acct):
            for _ in range(4):
                out = model(torch.ones(2, 3))
                out.sum().backward()
                float(out.detach().sum())  # a CPU tensor made from the model's output
                opt.step()
        carried[kind] = len(acct._carried)
        (record,) = ops_events(events)
        scalars = [s for s in record["syncs"] if s["op"] == "aten::_local_scalar_dense"]
        assert len(scalars) == (1 if kind is None else 0), record["syncs"]
    assert carried[None] > 0 and carried["cuda"] == 0


def test_leak_site_leaves_out_what_torch_optim_makes() -> None:
    finder = _finder(6)  # torch/optim's own code
    assert _lib(functools.partial(finder.leak_site, 1)) == (True, None)
    finder = _finder(3)  # torch/utils/data: batches a script may keep
    line = _here() + 1
    assert _lib(functools.partial(finder.leak_site, 1)) == (False, (__file__, line))


def test_an_optimizers_own_outputs_are_not_leak_candidates() -> None:
    events, emit = recorder()
    acct = OpAccountant(emit, early_steps=(2,), device_kind="cpu")
    model = nn.Linear(3, 3)
    opt = torch.optim.Adam(model.parameters(), lr=0.1, foreach=False)  # one op per parameter
    seen: list[Any] = []
    with StepDriver(acct):
        for _ in range(4):
            model(torch.ones(2, 3)).sum().backward()
            step_line = _here() + 1
            opt.step()
            if acct._leaks._samples and not seen:
                seen = list(acct._leaks._samples[0].refs)
    lines = {key[1] for _, key in seen}
    assert seen and step_line not in lines, lines


def test_what_lbfgs_makes_is_the_optimizers_and_its_closures_ops_the_scripts() -> None:
    """LBFGS's history (`old_dirs`, `old_stps` in optimizer.state, growing up to history_size)
    is made on the parameters' device by torch/optim/lbfgs.py (kind 4): not the script's
    `opt.step(closure)` line keeping tensors (a false "pile up" on CUDA). The closure it calls
    is the script's code: its ops are the script's lines."""
    finder = _finder(4)
    assert _lib(functools.partial(finder.leak_site, 1)) == (True, None)

    def closure() -> Any:
        return finder.leak_site(1), _here()

    (optimizer, site), line = _lib(lambda: closure())
    assert optimizer is False and site == (__file__, line)
