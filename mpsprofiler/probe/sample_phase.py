"""Which step the op sampler samples next: the budget's interval, spread over the phases
of a loop's periodic work.

Scripts do some work every Nth step (log, evaluate, keep a tensor: ``if step % 5 == 0``),
with N almost always made of 2s and 5s (2, 4, 5, 10, 20, 50, 100). An interval that is a
multiple of N samples the same phase every time: a script that keeps a tensor every 5th
step, sampled at steps 3, 8, 13, ..., never shows the step that keeps it (and the leak
tracking, which follows tensors made on sampled steps, never finds its line). So:

* an interval below 10 is rounded up to one coprime with 10 (1, 3, 7, 9): consecutive
  samples then walk through every residue mod 2, 4 and 5;
* from 10 on, the k-th sample goes to the first step at or after the interval whose last
  digit is ``3k mod 10`` (0, 3, 6, 9, 2, 5, ...): every five samples cover the five
  residues mod 5, and they alternate between odd and even steps.

Both only lengthen the interval (by at most 9 steps), so the sampler never costs more
than its budget allows.
"""

from __future__ import annotations

_COPRIME_10 = (1, 1, 3, 3, 7, 7, 7, 7, 9, 9)
"""For an interval of 0-9: the smallest interval >= it that shares no factor with 10."""


def next_sampled_step(step: int, interval: int, samples: int) -> int:
    """The step to sample after ``step``, at least ``interval`` later; ``samples`` is how
    many were taken so far (picks the phase)."""
    interval = max(1, int(interval))
    if interval < 10:
        return step + _COPRIME_10[interval]
    at = step + interval
    return at + (3 * samples - at) % 10
