"""mpsprof's own frames below and inside the script stay out of what the script sees
(issue 33): where ``warnings.warn(..., stacklevel=N)`` lands, how deep it can recurse,
and the frames of the traceback printed at exit. Each script runs under plain python and
through the real CLI; the outputs must be the same."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from helpers import Result, child_env, compare, read_events, run_mpsprof, run_python

WARNS = textwrap.dedent('''\
    import warnings
    def two():
        warnings.warn("two", DeprecationWarning, stacklevel=2)
    def outer():
        inner()
    def inner():
        warnings.warn("three", DeprecationWarning, stacklevel=3)
    def past_the_top():
        warnings.warn("past the top", DeprecationWarning, stacklevel=3)
    two()
    outer()
    def far_past_the_top():
        for level in range(4, 9):
            warnings.warn(f"level {level}", DeprecationWarning, stacklevel=level)
    past_the_top()
    far_past_the_top()
''')

DEPTH = textwrap.dedent('''\
    def depth(n):
        try:
            return depth(n + 1)
        except RecursionError:
            return n
    import sys
    print("usable depth", depth(0), "limit", sys.getrecursionlimit())
''')


@pytest.mark.parametrize("filters", [None, pytest.param("always::DeprecationWarning", marks=pytest.mark.slow)])
def test_stacklevel_warnings_and_recursion_depth_as_under_python(tmp_path: Path, filters: str | None) -> None:
    """stacklevel=2 / 3 name the script's line and are shown (``__main__``) as under
    python; a stacklevel past the script's top level ends at ``sys:1`` (hidden by the
    default filters, shown as ``sys:1`` with ``always``), not at a frame of mpsprof's
    that the ``__main__`` filter would show."""
    script = tmp_path / "w.py"
    script.write_text(WARNS)
    env = child_env(PYTHONWARNINGS=filters)
    plain, _ = compare([str(script)], tmp_path / "run", env=env)
    err = plain.stderr.decode()
    assert "w.py:10: DeprecationWarning: two" in err and "w.py:11: DeprecationWarning: three" in err
    assert ("sys:1: DeprecationWarning: past the top" in err) == (filters is not None)
    assert ("sys:1: DeprecationWarning: level 8" in err) == (filters is not None)


def _same_depth(args: list[str], run: Path, cwd: Path) -> tuple[Result, Result]:
    plain, profiled = run_python(args, cwd=cwd), run_mpsprof(args, run, cwd=cwd)
    assert plain.stdout.split(b" limit")[0] == profiled.stdout.split(b" limit")[0], (plain.stdout, profiled.stdout)
    return plain, profiled


@pytest.mark.parametrize("form", ["script", pytest.param("module", marks=pytest.mark.slow)])
def test_recursion_depth_as_under_python(tmp_path: Path, form: str) -> None:
    """A recursive function reaches python's depth and ``sys.getrecursionlimit()`` reads
    python's value: a script runs as the main program itself (start_code.py), no frame
    below it; with ``-m`` runpy's frames are python's own."""
    (tmp_path / "deep.py").write_text(DEPTH)
    args = [str(tmp_path / "deep.py")] if form == "script" else ["-m", "deep"]
    plain, profiled = compare(args, tmp_path / "run", cwd=tmp_path) if form == "script" else \
        _same_depth(args, tmp_path / "run", cwd=tmp_path)
    assert b"usable depth 9" in plain.stdout
    if form == "script":  # -m: one frame of ours below runpy's, the limit makes up for it
        assert profiled.stdout == plain.stdout


STACK = textwrap.dedent('''\
    """A docstring, then a future import: both stay first in the compiled script."""
    from __future__ import annotations
    import inspect, sys
    def inner():
        return [f.function for f in inspect.stack()]
    print(len(inspect.stack()), inspect.stack()[-1].filename == __file__, inner())
    print(sys.argv, sys.path[0] == __import__("os").path.dirname(__file__), __doc__)
    print(sys.orig_argv[1:], type(__loader__).__name__, __loader__.path == __file__, __spec__, __cached__)
    x: int = 1
    print(__annotations__, sorted(k for k in dir(__import__("builtins")) if "mpsprof" in k))
''')


@pytest.mark.slow
@pytest.mark.parametrize("safe", [None, "1"])
def test_inspect_stack_at_top_level_is_python_s(tmp_path: Path, safe: str | None) -> None:
    """The script's module frame is the outermost frame: ``inspect.stack()`` at the top
    level is 1 deep as under python (it was 2: the start program's frame), and argv,
    ``sys.path[0]`` (``PYTHONSAFEPATH`` too), ``__file__``, ``__doc__``, ``__loader__``,
    ``sys.orig_argv`` and the module's annotations are python's."""
    script = tmp_path / "s.py"
    script.write_text(STACK)
    plain, _ = compare([str(script), "a b"], tmp_path / "run", env=child_env(PYTHONSAFEPATH=safe))
    assert plain.stdout.startswith(b"1 True ['inner', '<module>']"), plain.stdout


DATASET = textwrap.dedent('''\
    from torch.utils.data import DataLoader, Dataset
    class Items(Dataset):
        def __len__(self):
            return 4
        def __getitem__(self, i):
            raise ValueError("bad item")
    for batch in DataLoader(Items(), batch_size=2):
        pass
''')

BACKWARD = textwrap.dedent('''\
    import sys, torch
    class Double(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2
        @staticmethod
        def backward(ctx, g):
            raise RuntimeError("bad backward")
    x = torch.ones(2, requires_grad=True)
    if sys.argv[1] == "hook":
        y = x * 3
        y.register_hook(lambda g: 1 / 0)
        y.sum().backward()
    else:
        Double.apply(x).sum().backward()
''')


@pytest.mark.slow
@pytest.mark.parametrize("case", ["dataset", "function", "hook"])
def test_exit_traceback_has_no_mpsprof_frames(tmp_path: Path, case: str) -> None:
    """The wrappers of DataLoader ``__next__`` and of ``_engine_run_backward`` are not
    in the traceback python prints at exit: same stderr, byte for byte."""
    script = tmp_path / "t.py"
    script.write_text(DATASET if case == "dataset" else BACKWARD)
    plain, profiled = compare([str(script), case], tmp_path / "run")
    assert plain.returncode == 1 and b"Traceback" in plain.stderr
    assert b"mpsprofiler" not in profiled.script_stderr




FORWARD_CRASH = textwrap.dedent('''\
    import sys, torch
    from torch import nn
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = nn.Linear(8, 16), nn.Linear(16, 2)
        def forward(self, x, step):
            h = torch.relu(self.a(x))
            return self.b(h[:, :15] if step == int(sys.argv[1]) else h)
    torch.manual_seed(0)
    model = Net()
    if sys.argv[2] == "user-hook":
        model.register_forward_hook(lambda module, args, out: None)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(20):
        loss = model(torch.randn(4, 8), step).sum()
        opt.zero_grad(); loss.backward(); opt.step()
''')


@pytest.mark.slow
@pytest.mark.parametrize("when,hooks", [("first", "none"), ("sampled", "none"), ("sampled", "user-hook")])
def test_crash_in_hooked_forward_prints_python_s_traceback(tmp_path: Path, when: str, hooks: str) -> None:
    """A crash in the run's first forward (the start marker's global hook) or in a
    sampled step (the module tracker's global hooks, the op dispatch mode) prints the
    traceback plain python prints: ``Module._call_impl`` at its fast-path call, no
    ``inner`` entry, no torch/_ops.py or Dynamo wrapper entries; the recording's crash
    frames are the same. A module with a hook of the user's takes torch's slow path
    under python too: its ``inner`` entry stays."""
    from mpsprofiler.probe.ops import EARLY_STEPS

    script = tmp_path / "crash.py"
    script.write_text(FORWARD_CRASH)
    step = 0 if when == "first" else EARLY_STEPS[0]  # the first sample is always taken
    plain, _ = compare([str(script), str(step), hooks], tmp_path / "run")
    err = plain.stderr.decode()
    assert plain.returncode == 1 and "mat1 and mat2 shapes cannot be multiplied" in err
    assert (", in inner" in err) == (hooks == "user-hook"), err
    crash = next(e for e in read_events(tmp_path / "run") if e.get("frames"))
    funcs = [f["func"] for f in crash["frames"]]
    python_s = [line.split(", in ")[-1] for line in err.splitlines() if line.startswith("  File ")]
    assert funcs == python_s, (funcs, python_s)
