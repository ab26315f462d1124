"""Backward passes as a step signal, for loops that update parameters without torch.optim.

``Tensor.backward()`` and ``torch.autograd.backward()`` both enter the autograd engine
through one module-level function, ``torch.autograd._engine_run_backward``
(torch/autograd/__init__.py calls it by that global name; torch.compiler's own
``_patch_engine_backward`` wraps the same name for the same reason). Wrapping it costs a
function call and a short frame walk per backward pass, nothing per op, and needs no
hook on any tensor, module or graph node:

* dynamo never traces it: ``torch.autograd.backward`` is a skipped function in dynamo's
  trace rules and ``Tensor.backward()`` is a graph break, so the pass always runs eagerly
  through this wrapper, outside any compiled graph. Frames that eager code inside a
  compiled function starts are still offered to dynamo's frame callback, so the wrapper's
  code is marked SKIP (as ``torch._dynamo.eval_frame.skip_code`` does; the frames the
  engine starts, such as user autograd hooks, keep the default), and the bookkeeping's
  code SKIP recursively;
* ``torch.autograd.grad`` goes through the same entry (``accumulate_grad=False``) and is
  counted too: loops that update from ``autograd.grad`` results have no other signal, and
  where it is a part of an iteration (a gradient penalty) its call site joins the cycle.

The call site (the first frame outside torch, plus its caller's line so a helper that
wraps ``loss.backward()`` still tells a GAN's generator and discriminator apart) lets the
step tracker learn which backward calls make one iteration.
"""

from __future__ import annotations

import os
import sys
import threading
import weakref
from collections import deque
from collections.abc import Callable
from types import FrameType
from typing import Any

from .safe_point import SafePoint

SKIPPED = object()
"""A pass whose site was not looked up (see ``install``'s ``needs_site``)."""
MAX_SITES = 256
MAX_SITE_KEYS = 1024
"""Call instructions whose site is remembered (a site can be reached from a few)."""
MAX_NODES = 1024
"""Graph nodes searched, once per call site, for a parameter (an AccumulateGrad node):
breadth-first over distinct nodes, so a parameter a few hundred ops from the loss (a
deep head, a torch.compile graph) is found, in under 10 ms. Not more: every node given a
Python wrapper makes the graph's later destruction recurse over it in C (torch 2.13 on
Linux: a 30,000-op chain whose first 4,096 nodes were walked segfaults when freed on a
512 KiB thread stack; 2,048 do not). A site whose search finds none is remembered as
such, never searched again: its passes always start a new iteration (no micro-batch
test), and with an optimizer the optimizer's steps count anyway."""


def install(on_backward: Callable[[Any, float, float, bool], None], clock: Callable[[], float],
            on_error: Callable[[BaseException], None],
            on_outputs: Callable[[Any], None] | None = None,
            needs_site: Callable[[], bool] | None = None, safe_point: SafePoint | None = None) -> Engine:
    """Wrap the engine entry; returns the :class:`Engine` switch (calling it uninstalls). ``on_backward(site, start, end, reset)``
    (start: before the call-site lookup, so the pass's time includes it, a few µs);
    ``on_outputs(t_outputs)`` (the training-health loss check) runs first and must not raise:
    ``reset`` is False when the site ran before and the gradients it accumulates into were
    not zeroed since (gradient accumulation: a micro-batch, not a new iteration).
    ``needs_site()`` False: the step tracker has no use for this pass's site (optimizer
    steps count the steps), so it is not looked up: ``on_backward(None, start, end, True)``.
    ``safe_point``: a change the op sampler left pending (see :mod:`.safe_point`) is made
    at the start of an outermost pass, before the engine runs any op."""
    import torch
    import torch.autograd as autograd
    import torch.autograd.graph as graph

    from .compiling import eager_is_compiling

    is_compiling = eager_is_compiling()  # at every backward pass: one C call (this code is SKIP for Dynamo)
    functional = _functorch_check(torch)
    checking = _gradcheck_check(sys.modules.get("torch.autograd.gradcheck"))

    original = autograd._engine_run_backward
    torch_dir = os.path.dirname(torch.__file__) + os.sep
    own_dir = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
    prefixes = (torch_dir, own_dir)
    failed = False
    watch: dict[Any, tuple[Any, Any, int]] = {}
    """site -> (weakref to one parameter its passes reach, weakref to that parameter's
    gradient after the site's last pass, that gradient's version counter then)."""

    known: dict[tuple[int, int, int, int], tuple[Site, Any, Any]] = {}
    """(code id, instruction, caller's code id, its instruction) -> (site, code, caller's
    code): the site of a call seen before, without its line numbers (a line-table scan
    each) or its hash (see :class:`Site`). The codes are kept, so their ids are not reused."""

    def site_of() -> Any:
        frame: FrameType | None = sys._getframe(3)
        while frame is not None and frame.f_code.co_filename.startswith(prefixes):
            frame = frame.f_back
        if frame is None:
            return None
        caller = frame.f_back
        code = frame.f_code
        caller_code = caller.f_code if caller is not None else None
        key = (id(code), frame.f_lasti, id(caller_code), caller.f_lasti if caller is not None else -1)
        hit = known.get(key)
        if hit is not None and hit[1] is code and hit[2] is caller_code:
            return hit[0]
        site = Site(code, frame.f_lineno, caller.f_lineno if caller is not None else 0)
        if len(known) < MAX_SITE_KEYS:
            known[key] = (site, code, caller_code)
        return site

    depth = threading.local()
    running = 0
    """Backward passes in progress on this thread / on every thread."""

    def _engine_run_backward(t_outputs: Any, *args: Any, **kwargs: Any) -> Any:
        nonlocal running, failed
        # a pass started inside another one (a reentrant checkpoint's recomputation, an
        # ``autograd.grad`` in a backward hook) is a part of that pass, never a step; nor
        # is one torch.compile runs while it traces (AOT autograd's joint graph: a pass
        # over FunctionalTensors from the script's forward line, under is_compiling())
        outer = getattr(depth, "n", 0)
        token = None
        started = 0.0
        if not outer and not is_compiling():
            if safe_point is not None and safe_point.pending is not None:
                safe_point.run()  # (no pass of this thread is running: outside any op)
            # (``autograd.grad`` passes alone are tested further: ``.backward()`` pays one dict read)
            if not failed and not functional(t_outputs) and not (
                    kwargs.get("accumulate_grad") is False and (_builds_graph(args, kwargs) or checking())):
                if on_outputs is not None:
                    on_outputs(t_outputs)  # the loss check (probe/health.py): guards itself
                try:
                    if not running and needs_site is not None and not needs_site():
                        token = SKIPPED  # no frame walk, no gradient bookkeeping (the step counter's usual case)
                        started = clock()
                    else:
                        token = before(t_outputs, running > 0)
                except Exception as exc:
                    failed = True
                    on_error(exc)
        depth.n = outer + 1
        running += 1
        try:
            result = original(t_outputs, *args, **kwargs)
        finally:
            depth.n = outer
            running -= 1
        if token is SKIPPED:
            try:
                on_backward(None, started, clock(), True)
            except Exception as exc:
                failed = True
                on_error(exc)
        elif token is not None:
            after(token)
        return result

    def before(t_outputs: Any, elsewhere: bool) -> Any:
        """The site of a pass the step tracker may need it for, and what the micro-batch
        test needs after it: (site, reset, parameter ref, start) or None."""
        nonlocal failed
        try:
            started = clock()
            site = site_of()
            if site is None and elsewhere:
                return None  # no script frame while another thread's pass runs: the engine's own
            watched = watch.get(site)
            ref = watched[0] if watched is not None else None
            param = ref() if ref is not None else None
            if watched is None or (ref is not None and param is None):
                # a new site, or its parameter is gone (a new model): search once
                ref = _leaf_of(t_outputs)
                return site, True, ref, started
            if param is None:
                return site, True, None, started  # no parameter found at this site: no accumulation test
            grad_ref, version = watched[1], watched[2]
            grad = grad_ref() if grad_ref is not None else None
            # the gradient was set to None, replaced or changed in place (``.zero_()``, a
            # clip) since this line's last pass: the loop ended an iteration, so this pass
            # starts a new one. Untouched since then: gradient accumulation, a micro-batch.
            reset = grad is None or grad is not param.grad or getattr(grad, "_version", version) != version
            return site, reset, ref, started
        except Exception as exc:
            failed = True
            on_error(exc)
            return None

    def after(token: Any) -> None:
        nonlocal failed
        site, reset, ref, started = token
        try:
            param = ref() if ref is not None else None
            grad = getattr(param, "grad", None)
            if len(watch) < MAX_SITES or site in watch:
                watch[site] = (ref if callable(ref) else None, weakref.ref(grad) if grad is not None else None,
                               getattr(grad, "_version", -1))
            on_backward(site, started, clock(), reset)
        except Exception as exc:
            failed = True
            on_error(exc)

    _hide_from_dynamo(_engine_run_backward, recursive=False)
    _hide_from_dynamo(before, recursive=True)
    _hide_from_dynamo(after, recursive=True)
    _hide_from_dynamo(checking, recursive=True)
    _engine_run_backward.__wrapped__ = original  # type: ignore[attr-defined]
    engine = Engine(autograd, graph, original, _engine_run_backward)
    engine.wrap()
    return engine


class Engine:
    """The engine entry's two holders (``torch.autograd`` and ``torch.autograd.graph``) and
    what they hold: torch's own function or the wrapper. Calling it uninstalls.

    :meth:`wrap` and :meth:`bare` swap the wrapper in and out between steps (see
    :mod:`.backward_sampling`): a step whose backward pass is not instrumented runs torch's
    own function, no frame of ours. Each swap writes a holder only where it still holds
    what this module put there (or torch's original): a name patched by someone else
    meanwhile (``torch.compiler._patch_engine_backward`` saves and restores it around a
    trace) is left to them, and after :meth:`__call__` nothing is swapped in again."""

    __slots__ = ("_holders", "_original", "_wrapper", "wrapped", "_gone")

    def __init__(self, autograd: Any, graph: Any, original: Any, wrapper: Any) -> None:
        # torch/autograd/__init__.py calls the name it imported from .graph; graph's own
        # module global is what ``torch.autograd.graph`` users (and torch.compiler) read
        self._holders = (autograd,) + ((graph,) if getattr(graph, "_engine_run_backward", None) is original else ())
        self._original = original
        self._wrapper = wrapper
        self.wrapped = False
        self._gone = False

    def wrap(self) -> None:
        """The wrapper in: the next passes are instrumented."""
        if self._gone:
            return
        self.wrapped = True
        self._swap(self._original, self._wrapper)

    def bare(self) -> None:
        """Torch's own function in: the next passes run as if no probe were there."""
        self.wrapped = False
        self._swap(self._wrapper, self._original)

    def _swap(self, old: Any, new: Any) -> None:
        for holder in self._holders:
            if holder._engine_run_backward is old:  # (else someone else's: left to them)
                holder._engine_run_backward = new

    def __call__(self) -> None:
        """Uninstall: torch's own function back, for good."""
        self._gone = True
        self.bare()


def _functorch_check(torch: Any) -> Callable[[Any], bool]:
    """Whether a pass runs inside a ``torch.func`` transform (``grad``, ``vjp``, ``vmap`` of
    them): its outputs are functorch's wrapped tensors (torch/_functorch/eager_transforms.py
    calls ``torch.autograd.grad`` on them). Such a pass is a part of a computation (per-sample
    gradients, DP-SGD, a meta-learning inner loop), never a step of the loop: it accumulates
    into no ``.grad`` (the micro-batch test cannot see accumulation there), and its loss is
    one sample's, which ``.item()`` cannot even read under ``vmap`` (the loss check)."""
    wrapped = getattr(getattr(getattr(torch, "_C", None), "_functorch", None), "is_functorch_wrapped_tensor", None)
    if wrapped is None:
        return lambda t_outputs: False

    def functional(t_outputs: Any) -> bool:
        try:
            first = t_outputs[0] if isinstance(t_outputs, (tuple, list)) else t_outputs
            return bool(wrapped(first))
        except Exception:
            return False

    return functional


def _builds_graph(args: Any, kwargs: Any) -> bool:
    """Whether a pass is ``torch.autograd.grad(..., create_graph=True)``: gradients that are
    a part of a larger graph (a MAML inner loop's adapted parameters, a gradient penalty, a
    physics-informed loss's derivatives), whose ``backward()`` comes later. Such a pass is no
    step of the loop, as one inside a torch.func transform is not: a MAML meta-iteration's 20
    inner passes came before its first optimizer step, each repeat of their line closed a
    step (170 of 150), and a step boundary inside a meta-iteration read its summed meta-loss
    as a graph kept across steps. ``grad`` calls the engine entry with ``(outputs,
    grad_outputs, retain_graph, create_graph, inputs, allow_unused, accumulate_grad=False)``
    (torch/autograd/__init__.py); ``backward(create_graph=True)`` accumulates into ``.grad``
    (``accumulate_grad=True``): a step's own pass (AdaHessian), still counted."""
    try:
        return kwargs.get("accumulate_grad") is False and len(args) > 2 and bool(args[2])
    except Exception:
        return False


def _gradcheck_check(module: Any) -> Callable[[], bool]:
    """Whether a pass is one of ``torch.autograd.gradcheck``'s (or ``gradgradcheck``'s): the
    numerical check the "Extending PyTorch" docs page gives for a custom
    ``autograd.Function``, often run once before training. It calls ``torch.autograd.grad``
    once per element of each output (torch/autograd/gradcheck.py,
    ``_compute_analytical_jacobian_rows``): 1,922 passes from one line of a script before its
    first optimizer step each closed a step (1,986 of 64), and their float64 inputs and
    results made the run's op and leak findings (float64 ops "per step", tensors "kept").
    Such a pass checks a function, it is no part of training: no step, no loss check. Asked
    for ``autograd.grad`` passes only (``accumulate_grad=False``): a walk over the torch
    frames above the engine entry to the first frame outside torch, a few frames."""
    filename = getattr(module, "__file__", None)
    if not filename:
        return lambda: False
    torch_dir = os.path.dirname(os.path.dirname(filename)) + os.sep

    def checking() -> bool:
        try:
            frame: FrameType | None = sys._getframe(2)
            while frame is not None and frame.f_code.co_filename.startswith(torch_dir):
                if frame.f_code.co_filename == filename:
                    return True
                frame = frame.f_back
            return False
        except Exception:
            return False

    return checking


class Site:
    """A backward call site: the script's code object, its line and its caller's line.

    Equal and hashed as the tuple ``(code, line, caller_line)``, but hashed once: a code
    object's hash covers its constants, nested functions' code included, so a training
    loop at a script's top level took ~8 µs to hash, and each pass hashed its site twice
    or more (the watch here, the step tracker's sets)."""

    __slots__ = ("code", "line", "caller_line", "_hash")

    def __init__(self, code: Any, line: int | None, caller_line: int | None) -> None:
        self.code, self.line, self.caller_line = code, line, caller_line
        self._hash = hash((code, line, caller_line))

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if not isinstance(other, Site):
            return NotImplemented
        return self._hash == other._hash and (self.code, self.line, self.caller_line) == (
            other.code, other.line, other.caller_line)

    def __repr__(self) -> str:
        return f"Site({getattr(self.code, 'co_filename', '?')}:{self.line}, caller line {self.caller_line})"


def _leaf_of(outputs: Any) -> Any:
    """A weak reference to one parameter the pass accumulates into (a plain leaf tensor,
    such as an input that requires grad, if no ``nn.Parameter`` is within reach), or None."""
    import torch

    items = outputs if isinstance(outputs, (tuple, list)) else (outputs,)
    nodes: deque[Any] = deque(getattr(t, "grad_fn", None) for t in items)
    visited: set[Any] = set()
    first = None
    while nodes and len(visited) < MAX_NODES:
        node = nodes.popleft()
        if node is None or node in visited:
            continue
        visited.add(node)
        variable = getattr(node, "variable", None)  # AccumulateGrad: the leaf it fills
        if variable is not None:
            if isinstance(variable, torch.nn.Parameter):
                return _weak(variable)
            first = first if first is not None else variable
            continue
        nodes.extend(n for n, _ in node.next_functions if n is not None and n not in visited)
    return _weak(first) if first is not None else None


def _weak(tensor: Any) -> Any:
    try:
        return weakref.ref(tensor)
    except TypeError:
        return None


def _hide_from_dynamo(fn: Any, recursive: bool) -> None:
    """Tell dynamo's frame callback to run ``fn``'s frames as they are (C API, no
    ``torch._dynamo`` import); ``recursive`` extends that to every frame they start."""
    try:
        from torch._C._dynamo import eval_frame as ef

        action = ef._FrameAction
        inner = action.SKIP if recursive else action.DEFAULT
        ef.set_code_exec_strategy(fn.__code__, ef._FrameExecStrategy(action.SKIP, inner))
    except Exception:
        pass  # an older or newer torch without this API: dynamo may look at the frame, harmlessly
