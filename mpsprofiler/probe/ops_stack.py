"""The op sampler's place in torch's dispatch-mode stack: at the bottom, below the user's modes.

``TorchDispatchMode.__exit__`` pops whatever is on top, so a mode pushed on top while a
user's ``with MyMode():`` is open would be popped by the user's exit instead of theirs.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode


def push_below(mode: TorchDispatchMode) -> bool:
    """Insert ``mode`` at the bottom of the stack; False (nothing pushed) while a tracing
    (infra) mode is active."""
    C = torch._C
    n = C._len_torch_dispatch_stack()
    for i in range(n):
        other = C._get_dispatch_stack_at(i)
        if getattr(other, "_mode_key", None) is not None or other.is_infra_mode():
            return False
    above = [_pop_top() for _ in range(n)]
    C._push_on_torch_dispatch_stack(mode)
    for other in reversed(above):
        C._push_on_torch_dispatch_stack(other)
    return True


def _pop_top() -> Any:
    try:
        return torch._C._pop_torch_dispatch_stack(None)
    except TypeError:  # older signature without the mode key
        return torch._C._pop_torch_dispatch_stack()


def remove_mode(mode: TorchDispatchMode) -> None:
    """Take ``mode`` out of the dispatch stack wherever it is, keeping the others in order."""
    C = torch._C
    n = C._len_torch_dispatch_stack()
    if not any(C._get_dispatch_stack_at(i) is mode for i in range(n)):
        return
    above = []
    for _ in range(n):
        top = _pop_top()
        if top is mode:
            break
        above.append(top)
    for other in reversed(above):
        C._push_on_torch_dispatch_stack(other)
