"""A fix that shows in a few steps only (a side loader's, read every N steps) is tried over
a window that spans its reads and judged by each run's mean step (experiment/trial.Window)."""

from __future__ import annotations

from mpsprofiler.experiment.candidates import candidate_for, side_window
from mpsprofiler.experiment.trial import TrialConfig, Window, _mean_step


def test_a_side_loaders_fix_spans_two_of_its_passes() -> None:
    window = side_window({"side_steps_per_pass": 30.0})
    assert window is not None and window.steps == 76 and "about every 30 steps" in window.reason
    assert side_window({"side_steps_per_pass": None}) is None  # a loader that serves the steps
    assert side_window({"side_steps_per_pass": 5000.0}) is None  # read too seldom to time here
    config = TrialConfig(steps=30, pairs=5).for_window(window)
    assert (config.steps, config.figure, config.pairs) == (76, "mean", 5)
    assert TrialConfig(steps=200).for_window(window).steps == 200  # never shorter than asked
    assert TrialConfig(steps=30).for_window(None) == TrialConfig(steps=30)


def test_only_the_loader_stall_fix_of_a_side_loader_gets_a_window() -> None:
    facts = {"suggested_num_workers": 4, "num_workers": 0, "loader_created": 2, "side_steps_per_pass": 30.0}
    stall = candidate_for({"rule": "dataloader-stall-critical", "title": "t"}, facts)
    assert stall is not None and stall.settings == {"dataloader": {"2": {"num_workers": 4, "persistent_workers": True}}}
    assert stall.window == Window(76, stall.window.reason if stall.window else "")
    plain = candidate_for({"rule": "dataloader-stall", "title": "t"}, {**facts, "side_steps_per_pass": None})
    assert plain is not None and plain.window is None


def test_a_runs_mean_step_leaves_out_step_0() -> None:
    """``training_s`` runs from the end of step 0 to the end of the last (session/summary.py)."""
    assert _mean_step({"training_s": 2.0, "count": 101}) == 0.02
    assert _mean_step({"training_s": 2.0, "count": 1}) is None
    assert _mean_step({"training_s": None, "count": 50}) is None
