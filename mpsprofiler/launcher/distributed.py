"""Distributed runs through torch's own launcher (``torch.distributed.run``, i.e. torchrun).

mpsprof does not launch ranks itself: it runs torchrun with the user's options and makes
each rank start as a single-process child does (launcher/start_code.py). torchrun closes inherited
descriptors, so each local rank reports over its own FIFO in a private (0700) folder
(``MPSPROF_CHANNEL=fifo:DIR``); the probe tags every event with its rank.
"""

from __future__ import annotations

import os
import shutil
import stat
import sys
import tempfile
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import argparse


class DistributedUsageError(ValueError):
    """torchrun options mpsprof cannot honour (said before anything starts)."""


@dataclass
class TorchrunPlan:
    options: list[str]
    """torchrun's own options, passed through unchanged."""
    script: str
    module: bool
    script_args: list[str] = field(default_factory=list)
    nproc: int = 1

    def argv(self, start: list[str]) -> list[str]:
        """torchrun runs ``python -u START... ARGS`` in each rank: ``start`` is what a single
        run's child gets (the compiled script, or the start program and ``[-m] TARGET``),
        so ranks start exactly as a single-process run does."""
        return [sys.executable, "-m", "torch.distributed.run", *self.options, *start, *self.script_args]


def _parser() -> argparse.ArgumentParser:
    from torch.distributed.run import get_args_parser

    return get_args_parser()


def local_world_size(value: str) -> int:
    """torchrun's ``--nproc-per-node``: a number, or auto | cpu | gpu | cuda."""
    try:
        return max(1, int(value))
    except ValueError:
        pass
    if value in ("gpu", "cuda", "auto"):
        try:
            import torch

            if torch.cuda.is_available():
                return torch.cuda.device_count()
        except Exception:
            pass
        if value != "auto":
            raise DistributedUsageError(f"--nproc-per-node {value}: no CUDA device is visible")
    return os.cpu_count() or 1


def plan_from_torchrun_argv(argv: list[str]) -> TorchrunPlan:
    """``mpsprof run -- torchrun [OPTIONS] SCRIPT ARGS`` (argv without the word torchrun)."""
    parser = _parser()
    try:
        ns = parser.parse_args(argv)
    except SystemExit as exc:
        raise DistributedUsageError("torchrun could not parse these options (see its message above)") from exc
    if getattr(ns, "no_python", False):
        raise DistributedUsageError("--no-python is not supported: mpsprof needs the Python interpreter in each rank")
    script_args = list(ns.training_script_args)
    cut = len(argv) - len(script_args) - 1
    options = [a for a in argv[:cut] if a not in ("-m", "--module")]
    return TorchrunPlan(
        options=options, script=ns.training_script, module=bool(ns.module), script_args=script_args,
        nproc=local_world_size(str(ns.nproc_per_node)),
    )


def plan_from_options(nproc: str, extra: list[str], script: str, module: bool, script_args: list[str]) -> TorchrunPlan:
    """``mpsprof run --nproc-per-node N [--torchrun-option ...] SCRIPT ARGS``."""
    options = ["--nproc-per-node", str(nproc), *extra]
    if not any(o.startswith(("--rdzv", "--master", "--nnodes", "--standalone", "--node")) for o in extra):
        options.append("--standalone")  # one node, a free port: no clash between concurrent jobs
    return TorchrunPlan(options=options, script=script, module=module, script_args=script_args,
                        nproc=local_world_size(str(nproc)))


class FifoChannels:
    """One FIFO per local rank, read by the parent; removed on close."""

    def __init__(self, nproc: int) -> None:
        self.dir = tempfile.mkdtemp(prefix="mpsprof-ch-")
        os.chmod(self.dir, stat.S_IRWXU)
        self.fds: dict[int, int] = {}
        for rank in range(nproc):
            path = os.path.join(self.dir, f"rank-{rank}.fifo")
            os.mkfifo(path, 0o600)
            # O_RDWR: the FIFO always has a writer, so reads wait instead of seeing EOF
            # before a rank has started (or between torchrun restarts)
            self.fds[rank] = os.open(path, os.O_RDWR | os.O_NONBLOCK)

    @property
    def spec(self) -> str:
        return f"fifo:{self.dir}"

    def close(self) -> None:
        for fd in self.fds.values():
            try:
                os.close(fd)
            except OSError:
                pass
        self.fds = {}
        shutil.rmtree(self.dir, ignore_errors=True)
