"""The per-step shortcuts of the probe (issue 34) change no figure: what each one skips is
proven unchanged or bounded here; the loops' step counts and findings are the other
tests' (test_loops.py, test_step_tracker.py, test_health.py ...)."""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import Any

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from mpsprofiler.devices.cpu import CpuBackend
from mpsprofiler.events.step_rows import as_read
from mpsprofiler.probe import backward, cputime
from mpsprofiler.probe.health import LossWatch
from mpsprofiler.probe.steps import StepTracker


def test_a_site_equals_and_hashes_as_its_tuple() -> None:
    code = test_a_site_equals_and_hashes_as_its_tuple.__code__
    a, b = backward.Site(code, 10, 20), backward.Site(code, 10, 20)
    assert a == b and hash(a) == hash((code, 10, 20)) and len({a, b}) == 1
    assert a != backward.Site(code, 11, 20) and a != backward.Site(code, 10, 21)


def test_the_site_of_a_line_is_looked_up_once() -> None:
    """The second pass from a line gets the same Site object: no line-table scan, no hash of
    the code object (which covers all its constants) per pass."""
    seen: list[Any] = []
    uninstall = backward.install(lambda site, start, end, reset: seen.append(site), time.perf_counter,
                                 lambda exc: pytest.fail(str(exc)))
    try:
        w = torch.ones(1, requires_grad=True)
        for _ in range(3):
            (w * 2).sum().backward()
        (w * 3).sum().backward()
    finally:
        uninstall()
    assert seen[0] is seen[1] is seen[2] and seen[3] != seen[0]
    assert seen[0].line is not None and seen[0].code is test_the_site_of_a_line_is_looked_up_once.__code__


def test_no_site_is_looked_up_once_optimizer_steps_count() -> None:
    sites: list[Any] = []
    wanted = [True]
    uninstall = backward.install(lambda site, start, end, reset: sites.append((site, reset, end >= start)),
                                 time.perf_counter, lambda exc: pytest.fail(str(exc)),
                                 needs_site=lambda: wanted[0])
    try:
        w = torch.ones(1, requires_grad=True)
        (w * 2).sum().backward()
        wanted[0] = False
        (w * 2).sum().backward()
    finally:
        uninstall()
    assert sites[0][0] is not None and sites[1] == (None, True, True)


@pytest.mark.skipif(not os.path.exists(cputime.SCHEDSTAT), reason="Linux scheduler statistics")
@pytest.mark.slow
@pytest.mark.serial  # measured microseconds: a test beside it preempts this thread between its two clock reads
def test_a_skipped_run_queue_read_hides_less_than_the_slack() -> None:
    clock = cputime.ThreadClock()
    fd = os.open(cputime.SCHEDSTAT, os.O_RDONLY)
    try:
        worst, reads = 0.0, 0
        t0 = time.perf_counter()
        for i in range(3000):
            sum(range(200 + i % 700))
            if i % 300 == 0:
                time.sleep(0.001)  # off the CPU: the next read is a real one
            true = int(os.pread(fd, 128, 0).split()[1]) / 1e9
            cpu, runq = clock.read(time.perf_counter() - t0)
            assert runq is not None and cpu > 0
            worst = max(worst, true - runq)
            reads += 1
    finally:
        os.close(fd)
        clock.close()
    assert worst <= cputime.RUNQ_SLACK + 1e-6  # + the time between reading the two clocks


@pytest.mark.skipif(not os.path.exists(cputime.SCHEDSTAT), reason="Linux scheduler statistics")
def test_another_thread_reads_no_run_queue() -> None:
    clock = cputime.ThreadClock()
    assert clock.read(0.0)[1] is not None
    got: list[Any] = []
    thread = threading.Thread(target=lambda: got.append(clock.read(1.0)))
    thread.start()
    thread.join()
    clock.close()
    assert got[0][1] is None


class _Ops(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.ops: list[str] = []

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        self.ops.append(str(func))
        return func(*args, **(kwargs or {}))


def test_a_cpu_loss_is_read_unseen_by_a_dispatch_mode() -> None:
    """The fast read (no guard) runs only while no dispatch mode is on the stack: under one
    (the op sampler's, a user's) the loss is read through the guard, unseen, as before."""
    sent: list[dict[str, Any]] = []
    watch = LossWatch(lambda kind, **f: sent.append(as_read(f)), lambda: 3, lambda: False)
    watch.on_backward((torch.tensor(0.5, requires_grad=True) * 1,))
    assert watch.last_finite == (3, 0.5) and watch.checked_on == {"every step"}
    nan = torch.tensor(float("nan"))
    with _Ops() as mode:
        watch.on_backward((nan,))
    assert not mode.ops and sent[0]["value"] == "nan" and sent[0]["step"] == 3


def test_closed_steps_are_all_sent_while_the_channel_thread_drains() -> None:
    """Steps are appended without a lock and taken from the front by the channel thread:
    none lost, none twice, in order."""
    sent: list[dict[str, Any]] = []
    tracker = StepTracker(lambda kind, **f: sent.append(as_read(f)), CpuBackend(), time.perf_counter)
    stop = threading.Event()

    def drain() -> None:
        while not stop.is_set():
            tracker.drain()

    thread = threading.Thread(target=drain)
    thread.start()
    opt = type("Opt", (), {"param_groups": [{"params": [object()]}]})()
    try:
        for _ in range(30_000):
            tracker.on_optimizer_step(opt)
    finally:
        stop.set()
        thread.join()
    tracker.finish()
    tracker.drain()
    indices = [i for event in sent for i in event["i"]]
    aggregated = sum(event["agg"]["n"] for event in sent if event.get("agg"))
    assert indices == list(range(len(indices)))
    assert len(indices) + aggregated == tracker.index


@pytest.mark.slow
def test_the_benchmark_of_the_per_step_cost_runs(tmp_path: Any) -> None:
    """benchmarks/step_cost.py, a round of each part (the figures themselves are the lead's)."""
    import json
    import subprocess

    out = tmp_path / "cost.json"
    script = os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks", "step_cost.py")
    subprocess.run([sys.executable, script, "--rounds", "1", "--steps", "20", "--warm", "8", "--json", str(out)],
                   check=True, capture_output=True, timeout=300, env={**os.environ, "OMP_NUM_THREADS": "1"})
    figures = json.loads(out.read_text())
    assert figures["ladder"]["full"]["step_us"] > 0 and "DataLoader batch" in figures["chains_us"]["full"]


def test_one_time_work_leaves_the_per_step_path_once_done() -> None:
    """The model's first sighting and torch's environment are each handled once, and on a
    CPU model the device timer's two listeners go (nothing to time, ever): a probe on a
    CPU loop makes no call to any of them after the first iteration."""
    from mpsprofiler.probe import channel as channel_mod
    from mpsprofiler.probe.probe import Probe

    fd = os.open(os.devnull, os.O_WRONLY)
    probe = Probe(channel_mod.Channel(fd), {"no_memory": True})
    probe.install()
    calls: list[tuple[int, str]] = []
    watched = {"_first_step", "_send_torch_environment", "on_boundary", "on_fetch_end"}
    iteration = [0]

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event == "call" and frame.f_code.co_name in watched and frame.f_code.co_filename.endswith("probe.py"):
            calls.append((iteration[0], frame.f_code.co_name))

    try:
        model = torch.nn.Linear(4, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.randn(64, 4)), batch_size=8)
        sys.setprofile(profile)
        try:
            for i, (x,) in enumerate(loader):
                iteration[0] = i
                opt.zero_grad()
                model(x).sum().backward()
                opt.step()
        finally:
            sys.setprofile(None)
        assert probe.tracker.index >= 6
    finally:
        probe.close()
        for undo in reversed(probe._uninstallers):
            undo()
    names = {name for _, name in calls}
    assert {"_first_step", "_send_torch_environment", "on_fetch_end"} <= names, calls
    assert all(i == 0 for i, _ in calls), calls
    assert probe._device_listeners is None


def _probe_loop(steps: int, profile: Any, iteration: list[int]) -> Any:
    """A probe without op accounting (whose sampled steps run module hooks) on a CPU loop
    of ``steps`` iterations, ``profile`` set around them."""
    from mpsprofiler.probe import channel as channel_mod
    from mpsprofiler.probe.probe import Probe

    fd = os.open(os.devnull, os.O_WRONLY)
    probe = Probe(channel_mod.Channel(fd), {"no_memory": True, "no_ops": True})
    probe.install()
    try:
        model = torch.nn.Linear(4, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        x = torch.randn(8, 4)
        sys.setprofile(profile)
        try:
            for i in range(steps):
                iteration[0] = i
                opt.zero_grad()
                model(x).pow(2).mean().backward()
                opt.step()
        finally:
            sys.setprofile(None)
        return probe
    finally:
        probe.close()
        for undo in reversed(probe._uninstallers):
            undo()


def test_a_step_asks_is_compiling_once_and_runs_one_global_optimizer_hook() -> None:
    """From the second iteration on, a step of an optimizer loop makes one Python call of
    ``torch.compiler.is_compiling`` (the optimizer post-hook's: the backward wrapper reads
    the flag with a C call) and runs one global optimizer hook of the probe's: the loss
    watch learns the optimizer in the step tracker's post-hook, and the pre-hook, whose
    marks the tracker reads only until it counts optimizer steps, is gone."""
    from torch.optim import optimizer as optim_mod

    before = (len(optim_mod._global_optimizer_pre_hooks), len(optim_mod._global_optimizer_post_hooks))
    calls: list[tuple[int, str]] = []
    iteration = [0]
    hooks = {"hook", "pre_hook", "post_hook"}

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event != "call":
            return
        code = frame.f_code
        if code.co_name == "is_compiling" or (code.co_name in hooks and "mpsprofiler" in code.co_filename):
            calls.append((iteration[0], code.co_name))

    probe = _probe_loop(6, profile, iteration)
    assert probe.tracker.index >= 4 and probe.health.checks == 6 and probe.health.lr_first == 0.1
    later = [name for i, name in calls if i >= 1]
    assert sorted(later) == sorted(["is_compiling", "hook"] * 5), calls
    assert ("pre_hook" in {name for i, name in calls if i == 0})  # the first step's marks are still made
    after = (len(optim_mod._global_optimizer_pre_hooks), len(optim_mod._global_optimizer_post_hooks))
    assert after == before  # all removed at the end


def test_the_backward_wrappers_compile_check_is_torchs_answer() -> None:
    """The backward wrapper's ``is_compiling`` (``compiling.eager_is_compiling``) answers as
    ``torch.compiler.is_compiling`` does, outside and inside a compile session (the flag
    torch.compile holds while AOT autograd traces a joint backward pass)."""
    from mpsprofiler.probe.compiling import eager_is_compiling

    fn = eager_is_compiling()
    assert fn() is torch.compiler.is_compiling() is False
    session = getattr(torch.compiler, "_compile_session_context", None)
    if session is None:
        pytest.skip("this torch has no compile-session flag to set")
    with session():
        assert fn() is torch.compiler.is_compiling() is True
    assert fn() is False


def test_a_loss_check_reads_what_is_floating_and_one_element() -> None:
    """The CPU fast path's dtype lookup and shape test take the losses
    ``Tensor.is_floating_point()`` and ``numel() == 1`` take: float16 to float64, a
    one-element vector, a list of outputs; not a multi-element output."""
    sent: list[dict[str, Any]] = []
    step = [0]
    watch = LossWatch(lambda kind, **f: sent.append(as_read(f)), lambda: step[0], lambda: False)
    for i, dtype in enumerate((torch.float16, torch.bfloat16, torch.float32, torch.float64)):
        step[0] = i
        watch.on_backward((torch.tensor(0.25, dtype=dtype),))
        assert watch.last_finite == (i, 0.25)
    watch.on_backward((torch.ones(3),))  # not a loss: not read
    watch.on_backward([torch.full((1,), 2.0)])
    assert watch.checks == 5 and watch.last_finite == (3, 2.0) and not sent
    step[0] = 9
    watch.on_backward((torch.tensor([float("inf")], dtype=torch.float64),))
    assert sent[0]["step"] == 9 and sent[0]["value"] == "inf" and sent[0]["last_finite_step"] == 3


def test_the_one_optimizer_shortcut_closes_the_steps_the_general_path_does() -> None:
    """``StepTracker.on_optimizer_step``'s shortcut for a learnt one-optimizer cycle gives
    the rows the general path gives, step for step: fetches before and after the step,
    backward passes, a second optimizer appearing late (which ends the shortcut's cases)."""
    from helpers import FakeClock

    def drive(shortcut: bool) -> list[tuple[Any, ...]]:
        clock = FakeClock(tick=0.001)
        tracker = StepTracker(lambda kind, **f: None, CpuBackend(), clock)
        a = type("Opt", (), {"param_groups": [{"params": [object()]}]})()
        b = type("Opt", (), {"param_groups": [{"params": [object()]}]})()
        for i in range(40):
            if not shortcut:
                tracker._single = None  # the general path every time
            started = tracker.on_fetch_start()
            tracker.on_fetch_end(started, True)
            begun = clock()
            tracker.on_backward(None, clock(), True, begun)
            tracker.on_optimizer_step(a)
            if i >= 30:
                tracker.on_optimizer_step(b)
            if i % 7 == 0:  # a fetch after the step: the next step's
                tracker.on_fetch_end(tracker.on_fetch_start(), True)
        tracker.finish()
        # (the fetches' thread CPU time and run-queue wait are the real clocks': left out)
        return [row[:7] + row[9:] for row in tracker._rows]

    fast, general = drive(True), drive(False)
    assert len(fast) >= 38 and fast == general
