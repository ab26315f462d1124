"""Which module an op runs in, on sampled steps only.

Global forward pre/post hooks keep a stack of module paths (``encoder.layers.3.attn``).
Any global hook sends every module call of the process down PyTorch's slow path, so the
hooks are installed for sampled steps and removed right after.

Global hooks are what Dynamo must never see (``compiling``): the accountant stops
installing them once ``torch.compile`` is called. Per-module hooks or a patched
``Module.__call__`` would be traced just the same, and naming modules from the Python
stack inside the dispatch mode would cost a frame walk per op; a compiled graph runs as
one call anyway, so its ops are counted without module names. The hooks start with
``is_compiling()``: should another Dynamo entry (``torch.export``) reach one, it is a
no-op Dynamo can trace.

Backward ops run outside any forward: at the end of each module's forward the autograd
nodes it created are mapped to its path, and during backward
``torch._C._current_autograd_node()`` finds the module of the node being run. Autograd
numbers the nodes a thread creates in order, so the nodes a forward created are the
sequence numbers between the one current when it started and the one current when it
ended, less those of its inner modules' forwards (which ended first and mapped theirs):
ranges of integers, no walk over the graph (a walk per module visited each node once per
level of nesting, a third of the tracker's cost on a transformer). Nodes are kept by
sequence number, never by reference, so no part of the graph is kept alive.

Placement: a module whose own parameters are on another device than its input, and the
device most parameters of the root modules live on (the "model device").
"""

from __future__ import annotations

import weakref
from collections import Counter
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from .compiling import is_compiling
from .safe_point import SafePoint

_NO_SEQ = 1 << 63  # AccumulateGrad and other graph leaves have sequence number UINT64_MAX
MAX_NAMES = 100_000
MAX_ROOT_PARAMS = 2_000  # enough to tell where a model lives
MAX_NODE_VISITS = 200_000
"""Per sampled step: bounds the nodes mapped on huge models (attribution just stops)."""


def _get_seq() -> Callable[[], int] | None:
    return getattr(getattr(torch._C, "_autograd", None), "_get_sequence_nr", None)


def first_tensor(value: Any) -> torch.Tensor | None:
    if isinstance(value, torch.Tensor):
        return value
    if isinstance(value, (tuple, list)):
        for item in value:
            if isinstance(item, torch.Tensor):
                return item
    if isinstance(value, dict):
        for item in value.values():
            if isinstance(item, torch.Tensor):
                return item
    return None


ROOT_PREFIX = "model"
"""The path of the first root module with children: ``model.encoder.0 (Linear)``."""


class ModuleTracker:
    """Module path of the op in progress, plus placement facts, while installed."""

    def __init__(self, on_error: Callable[[BaseException], None]) -> None:
        self._on_error = on_error
        self._names: dict[int, tuple[weakref.ref[nn.Module], str, str]] = {}
        self._stack: list[tuple[str, nn.Module, int, list[tuple[int, int]]]] = []
        """(path, module, seq at start, the sequence ranges of its inner modules' forwards)"""
        self._node_module: dict[int, str] = {}
        self._visits = 0
        self._checked: set[int] = set()
        self._handles: list[Any] = []
        self._seq = _get_seq()
        self._current_node = getattr(torch._C, "_current_autograd_node", None)
        self.mismatches: dict[str, tuple[str, str]] = {}
        self.root_devices: Counter[str] = Counter()
        self._roots_seen: set[int] = set()
        self._model_named = False
        self.broken = False
        self.release = SafePoint()
        """Set by the accountant to end a sample early; run at this thread's next module call."""

    # -- install ----------------------------------------------------------------
    def install(self) -> None:
        from torch.nn.modules import module as mod

        if self._handles:
            return
        self._handles.append(mod.register_module_forward_pre_hook(self._pre))
        try:
            handle = mod.register_module_forward_hook(self._post, always_call=True)
        except TypeError:  # torch < 2.1: no always_call; the stack is reset every step
            handle = mod.register_module_forward_hook(self._post)
        self._handles.append(handle)

    def remove(self) -> None:
        self.release.clear()
        for handle in self._handles:
            try:
                handle.remove()
            except Exception:
                pass
        self._handles.clear()
        self._stack.clear()

    def reset_step(self) -> None:
        """Forget per-step state (stack, node map, placement checks)."""
        self._stack.clear()
        self._node_module.clear()
        self._visits = 0
        self._checked.clear()
        self.mismatches.clear()
        self.root_devices.clear()  # a model may move between samples (model.to(device))
        self._roots_seen.clear()

    # -- queries ----------------------------------------------------------------
    def current(self) -> str:
        """Path of the innermost module in forward, or of the autograd node in backward."""
        if self._stack:
            return self._stack[-1][0]
        if self._node_module and self._current_node is not None:
            node = self._current_node()
            if node is not None:
                return self._node_module.get(node._sequence_nr(), "")
        return ""

    def model_device(self) -> str | None:
        """Where most parameters of the root modules seen so far live."""
        if not self.root_devices:
            return None
        return self.root_devices.most_common(1)[0][0]

    # -- names ------------------------------------------------------------------
    def name_of(self, module: nn.Module) -> str:
        entry = self._names.get(id(module))
        if entry is not None and entry[0]() is module:
            return entry[1]
        if self._stack:
            parent = self._stack[-1][1]
            self._register(parent, self._prefix_of(parent))
            entry = self._names.get(id(module))
            if entry is not None and entry[0]() is module:
                return entry[1]
            # called by a parent but not registered as its child (a plain list, a function)
            parent_prefix = self._prefix_of(parent)
            path = f"{parent_prefix}.{type(module).__name__}" if parent_prefix else type(module).__name__
            self._remember(module, path, path)
            return path
        self._register(module, "")
        return self._names[id(module)][1]

    def _prefix_of(self, module: nn.Module) -> str:
        entry = self._names.get(id(module))
        return entry[2] if entry is not None and entry[0]() is module else ""

    def _register(self, root: nn.Module, prefix: str) -> None:
        """Name every submodule of ``root`` once, with its type: ``model.3 (Conv2d)``.

        A root module with children is the model: its children's paths start with
        ``model`` (a second such root with its class name); a root without children (a
        loss function) is named by its class alone."""
        if len(self._names) > MAX_NAMES:
            self._names.clear()
        if not prefix:
            if next(root.children(), None) is None:
                self._remember(root, type(root).__name__, "")
                return
            prefix = ROOT_PREFIX if not self._model_named else type(root).__name__
            self._model_named = True
        for name, sub in root.named_modules(prefix=prefix):
            if id(sub) not in self._names or self._names[id(sub)][0]() is not sub:
                self._remember(sub, f"{name} ({type(sub).__name__})", name)

    def _remember(self, module: nn.Module, path: str, prefix: str) -> None:
        try:
            self._names[id(module)] = (weakref.ref(module), path, prefix)
        except TypeError:
            pass

    def _note_root(self, module: nn.Module) -> None:
        """Count where the parameters of a root module (called outside any other) live."""
        if id(module) in self._roots_seen:
            return
        self._roots_seen.add(id(module))
        for i, param in enumerate(module.parameters()):
            if i >= MAX_ROOT_PARAMS:
                break
            if param.device.type != "meta":
                self.root_devices[str(param.device)] += param.numel()

    # -- hooks ------------------------------------------------------------------
    def _pre(self, module: nn.Module, args: Any) -> None:
        if is_compiling():
            return
        if self.release.pending is not None:
            # a module call is outside any op: the dispatch stack can be changed here (the
            # hook loop of _call_impl runs over a copy, so removing hooks is safe too)
            self.release.run()
            return
        if self.broken:
            return
        try:
            if not self._stack:
                self._note_root(module)
            path = self.name_of(module)
            self._stack.append((path, module, self._seq() if self._seq is not None else _NO_SEQ, []))
            if id(module) not in self._checked:
                self._checked.add(id(module))
                self._check_placement(module, path, args)
        except Exception as exc:
            self._fail(exc)
        return

    def _post(self, module: nn.Module, args: Any, output: Any) -> None:
        if self.broken or is_compiling():
            return
        try:
            stack = self._stack
            for i in range(len(stack) - 1, -1, -1):
                if stack[i][1] is module:
                    path, _, seq, inner = stack[i]
                    del stack[i:]
                    if seq < _NO_SEQ and self._seq is not None and torch.is_grad_enabled():
                        self._map_nodes(path, seq, inner)
                        if i:
                            stack[i - 1][3].append((seq, self._seq()))
                    break
        except Exception as exc:
            self._fail(exc)
        return

    def _map_nodes(self, path: str, seq_start: int, inner: list[tuple[int, int]]) -> None:
        """Give ``path`` to the autograd nodes created since the module started, but for
        the ranges of its inner modules (they finished first and keep theirs)."""
        assert self._seq is not None
        seq_end = self._seq()
        node_module = self._node_module
        start = seq_start
        for a, b in [*inner, (seq_end, seq_end)]:
            if a > start and self._visits < MAX_NODE_VISITS:
                self._visits += a - start
                node_module.update(dict.fromkeys(range(start, a), path))
            start = max(start, b)

    def _check_placement(self, module: nn.Module, path: str, args: Any) -> None:
        param = next(module.parameters(recurse=False), None)
        tensor = first_tensor(args)
        if param is None or tensor is None:
            return
        p_dev, i_dev = param.device, tensor.device
        if p_dev != i_dev and "meta" not in (p_dev.type, i_dev.type):
            self.mismatches.setdefault(path, (str(p_dev), str(i_dev)))

    def _fail(self, exc: BaseException) -> None:
        self.broken = True
        self._on_error(exc)
