"""A list that one thread appends to and another takes from, without a lock on the append.

The training thread hands its per-step and per-batch records (the step tracker's closed
steps, the DataLoader batches of the per-loader sums) to the probe's channel thread this
way: at every step or batch it only appends (``list.append``, or ``list.extend`` by a
tuple's items, holds the GIL throughout, so it is atomic), and the channel thread folds what was appended at its wakes (issue 34:
the training thread's share is one append). Taking must not lose a record appended while
it takes: :func:`take` copies the records there are and deletes exactly those (each one
C call under the GIL), so one appended in between stays for the next take, where swapping
in a new list could leave it in the old one.
"""

from __future__ import annotations

from typing import TypeVar

T = TypeVar("T")


def take(records: list[T]) -> list[T]:
    """The records appended to ``records`` so far, removed from it (an empty list if none)."""
    n = len(records)
    if not n:
        return []
    taken = records[:n]
    del records[:n]  # only the records taken: one appended since then stays
    return taken
