"""Syncs a framework makes inside the user's line, and the setting that stops them.

The op sampler names a sync by the script's line (``trainer.train()``) and, when the call
passed through library code on its way (``StepRecord.sync``, the ``via`` of a sync entry),
the innermost library frame too. A line that only starts a framework cannot be changed to
read less; the framework's own setting can. One such setting is known here:

* A torch optimizer's own reads (``torch.optim.LBFGS.step`` reads scalars in its history
  loop and its convergence tests, torch/optim/lbfgs.py): no setting; the fix says so (``optimizer``).
* Autograd's anomaly detection with its NaN checks (``anomaly``): each backward op's output
  is tested for NaN, a read each (torch/autograd/anomaly_mode.py), all named at the line
  that runs the backward pass; turning the mode off is the fix (``anomaly-detection-on``).
* Hugging Face ``Trainer``: with ``TrainingArguments.logging_nan_inf_filter`` (default
  ``True``) its training loop tests ``torch.isnan(tr_loss_step) or torch.isinf(tr_loss_step)``
  after every micro-batch (the training loop of transformers/trainer.py:
  ``_inner_training_loop``, or ``_run_epoch`` in later releases):
  two reads of a device tensor, two syncs, per micro-batch (transformers issue #33693
  measured 7% of a GPU run's time on that line). The argument's help says it "Does not
  affect gradient computation, only logging" (transformers/training_args.py), so the fix
  turns it off in the script's own ``TrainingArguments(...)`` call, rewritten with its
  other arguments as written (``framework_place``'s search for that call).

Facts: ``sync_top_via`` (the library line most of the top sync line's calls came through,
``transformers/trainer.py:1956 (_inner_training_loop)``) and ``sync_top_via_where`` (a code:
``inside`` or ``none``) for the evidence; ``sync_fix_where`` (``plain``, ``distributions``, ``anomaly``, ``anomaly_engine``, ``optimizer``, ``trainer_filter``
or ``trainer_filter_line``, and ``sync_fix_why``: codes ``rules/ops.yaml`` words), ``sync_fix_place`` (the
``TrainingArguments`` line; ``sync_fix_file`` and ``sync_fix_line`` for ``mpsprof patch``),
``sync_fix_code`` and ``sync_fix_per_step`` (the syncs the setting removes, per step) for the fix.
``sync_checks`` (``none``, ``distributions``, ``distributions_call``) with ``sync_checks_line``,
``sync_checks_per_step`` and, where the call was found, ``sync_checks_code`` (the script's
distribution call with ``validate_args=False``), ``sync_checks_file`` and ``sync_checks_lineno``
for ``mpsprof patch``: :func:`_checks`.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import os
import re
from typing import Any

from ...session.ops import OpStats, SyncRow
from ...session.session import Session
from .framework_place import arguments_fix
from .registry import analyzer
from .source_edit import rewrite_call, short_path

SYNC_FIX_FACTS: tuple[str, ...] = ("sync_checks", "sync_checks_code", "sync_checks_file", "sync_checks_line",
                                   "sync_checks_lineno", "sync_checks_per_step", "sync_fix_code", "sync_fix_code_edit",
                                   "sync_fix_file", "sync_fix_line", "sync_fix_per_step",
                                   "sync_fix_place", "sync_fix_where", "sync_fix_why", "sync_top_via",
                                   "sync_top_via_where")
DISTRIBUTIONS = os.path.join("torch", "distributions") + os.sep

TRAINER_FILE = os.path.join("transformers", "trainer.py")
OPTIMIZERS = "torch.optim."
"""The op sampler's module for ops inside an optimizer's ``step`` (``torch.optim.LBFGS.step``):
syncs there are torch's own code, which no line of the script can change."""
FILTER_SETTING = "logging_nan_inf_filter"
BACKWARD_CALLS = re.compile(r"\.backward\(|autograd\.backward\(|autograd\.grad\(|\.backward$")
"""A line that runs a backward pass: with anomaly detection's NaN checks on, its reads are those."""


def is_trainer_filter(via: tuple[str, int, str, str] | None) -> bool:
    """Whether a library frame is the Trainer's NaN/inf loss filter: transformers' trainer.py,
    at the statement that names the setting or tests both ``isnan`` and ``isinf``."""
    if via is None:
        return False
    file, _, _, code = via
    return file.endswith(TRAINER_FILE) and (FILTER_SETTING in code or ("isnan" in code and "isinf" in code))


def library_path(path: str) -> str:
    """A library file as its package names it (``transformers/trainer.py``): the part after
    the last ``site-packages``/``dist-packages``, else the path as given."""
    for marker in ("site-packages", "dist-packages"):
        cut = path.rfind(marker + os.sep)
        if cut >= 0:
            return path[cut + len(marker) + 1:]
    return path


def _per_step_of_filter(ops: OpStats, rows: list[SyncRow]) -> float:
    calls = sum(n for row in rows for via, n in row.vias.items() if is_trainer_filter(via))
    return ops.per_step(calls)


def sync_fix(ops: OpStats, cwd: Any = None) -> dict[str, Any]:
    """The facts above from the sampled steps' syncs; ``cwd``: the run's directory (paths
    inside it are shown relative to it)."""
    rows = ops.top_syncs(1000)
    if not rows:
        return {}
    top = rows[0]
    via = top.via
    out: dict[str, Any] = {"sync_top_via_where": "none", "sync_fix_where": "plain", **_checks(ops, rows, cwd)}
    if via is not None:
        out["sync_top_via"] = f"{library_path(via[0])}:{via[1]} ({via[2]})"
        out["sync_top_via_where"] = "inside"
    if ops.anomaly_steps and ops.anomaly_check_nan and BACKWARD_CALLS.search(top.code or ""):
        # autograd's anomaly detection checks each backward op's output for NaN, a read each
        # (torch/autograd/anomaly_mode.py): the backward line makes none of its own
        out["sync_fix_where"] = "anomaly"
        return out
    if ops.anomaly_steps and ops.anomaly_check_nan and not top.file:
        # the same checks on a GPU: autograd runs a CUDA (or MPS) backward pass in its own
        # device thread (torch/csrc/autograd/engine.cpp), where no line of the script is on
        # the stack: the reads come without a line (a CUDA run read "most from ?")
        out["sync_fix_where"] = "anomaly_engine"
        return out
    if top.module.startswith(OPTIMIZERS) and library_path(top.file) != top.file:
        # torch's optimizer reads its scalars itself (LBFGS: its history loop, its convergence tests)
        out["sync_fix_where"] = "optimizer"
        out["sync_fix_place"] = library_path(top.file)
        return out
    if via is not None and DISTRIBUTIONS in via[0]:
        # the most frequent read is torch.distributions checking its arguments at the
        # script's line, not a value the script reads: the plain variant's logging snippet
        # would stand beside a line it does not fit (sync_checks says the switch)
        out["sync_fix_where"] = "distributions"
        return out
    if not is_trainer_filter(via):
        return out
    out["sync_fix_per_step"] = _per_step_of_filter(ops, rows)
    out["sync_fix_why"] = "trainer_filter"
    fix = arguments_fix(top.file, top.line, {FILTER_SETTING: "False"}, cwd)
    out["sync_fix_code"] = fix.code
    out["sync_fix_code_edit"] = fix.edit
    if fix.path is None:
        out["sync_fix_where"] = "trainer_filter"
        return out
    out.update({"sync_fix_where": "trainer_filter_line", "sync_fix_place": fix.place,
                "sync_fix_file": fix.path, "sync_fix_line": fix.line})  # fmt: skip
    return out


def _checks(ops: OpStats, rows: list[SyncRow], cwd: Any) -> dict[str, Any]:
    """``sync_checks``: ``distributions`` where torch.distributions' argument checks made
    reads (``validate_args``, on by default: each ``Categorical(probs)`` tests its
    probabilities with ``.all()``, a read on a GPU; torch/distributions/distribution.py,
    ``Distribution.__init__``), with the script's line that made most of them; else ``none``.
    ``distributions_call`` where that line's distribution call was found: the fix is that
    statement as written with ``validate_args=False`` added to the call
    (``sync_checks_code``; ``sync_checks_file`` and ``sync_checks_lineno`` for ``mpsprof
    patch``). A line that builds a distribution is preferred to one that only uses it
    (``m.log_prob(action)`` checks the sample there, but the switch is the constructor's)."""
    calls: dict[tuple[str, int], int] = {}
    for row in rows:
        for via, n in row.vias.items():
            if via is not None and DISTRIBUTIONS in via[0]:
                calls[(row.file, row.line)] = calls.get((row.file, row.line), 0) + n
    if not calls:
        return {"sync_checks": "none"}
    names = distribution_classes()
    fixes = {site: rewrite_call(site[0], site[1], names, {VALIDATE: "False"}, keep=checks_on) if names else None
             for site in calls}
    (file, line), _ = max(calls.items(), key=lambda kv: (fixes[kv[0]] is not None, kv[1]))
    out = {"sync_checks": "distributions", "sync_checks_per_step": ops.per_step(sum(calls.values())),
           "sync_checks_line": f"{short_path(file, cwd)}:{line}"}
    fix = fixes[(file, line)]
    if fix is not None:
        out.update({"sync_checks": "distributions_call", "sync_checks_code": fix.after,
                    "sync_checks_file": fix.path, "sync_checks_lineno": line})
    return out


VALIDATE = "validate_args"


def checks_on(call: ast.Call) -> bool:
    """A distribution call that leaves its argument checks on: it passes no ``validate_args``
    (nor ``**kwargs``, which may hold it: one more keyword would be a TypeError)."""
    return not any(k.arg in (VALIDATE, None) for k in call.keywords)


@functools.lru_cache(maxsize=1)
def distribution_classes() -> tuple[str, ...]:
    """The classes ``torch.distributions`` exports, read from the installed torch's
    ``torch/distributions/__init__.py`` (its ``__all__``) without importing torch; each
    takes ``validate_args`` (``Distribution.__init__`` and every subclass's own). Empty
    where torch is not installed or the list cannot be read: the fix then names no call."""
    try:
        spec = importlib.util.find_spec("torch")
        roots = list(spec.submodule_search_locations or []) if spec is not None else []
        if not roots:
            return ()
        with open(os.path.join(roots[0], "distributions", "__init__.py"), encoding="utf-8") as fh:
            tree = ast.parse(fh.read())
    except (OSError, SyntaxError, ValueError, ImportError):
        return ()
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            try:
                names = ast.literal_eval(node.value)
            except ValueError:
                return ()
            return tuple(n for n in names if isinstance(n, str) and n[:1].isupper())
    return ()


@analyzer("sync_fix", provides=SYNC_FIX_FACTS)
def sync_fix_facts(session: Session) -> dict[str, Any]:
    return sync_fix(session.ops, session.run.get("cwd"))
