"""The op sampler's steps cover every phase of work done every Nth step (probe/sample_phase.py)."""

from __future__ import annotations

import pytest

from mpsprofiler.probe.sample_phase import next_sampled_step


@pytest.mark.parametrize("interval", [1, 2, 4, 5, 7, 10, 20, 25, 50, 97])
def test_samples_cover_every_phase_of_a_5_step_period_and_never_come_early(interval: int) -> None:
    step, samples, seen = 5, 2, []
    for _ in range(10):
        nxt = next_sampled_step(step, interval, samples)
        assert interval <= nxt - step <= interval + 9
        step, samples = nxt, samples + 1
        seen.append(step)
    assert {s % 5 for s in seen} == set(range(5)), seen
    assert {s % 2 for s in seen} == {0, 1}, seen
