"""The TUI's ``t`` key: try the selected finding's fix on the script and show the result.

The experiment is :class:`~mpsprofiler.experiment.trial.Trial`, run on a thread worker
that only posts progress to the UI thread (``call_from_thread``). It runs the recorded
script again (A/B pairs, cut after the same steps) in the run's own directory, so it
waits until the profiled script has ended. The result is stored in the run directory
(``experiments.json``), where ``mpsprof report`` and a later ``view`` find it.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..experiment.trial import Trial, TrialConfig
from .widgets.experiment import ExperimentPanel

if TYPE_CHECKING:
    from textual.app import App

    from ..diagnosis.findings import Finding
    from ..session.session import Session
    from .state import RunState

    _AppBase = App[None]  # the app this is mixed into, for the type checker only
else:
    _AppBase = object

TUI_CONFIG = TrialConfig(steps=20, pairs=5, budget_s=300.0)


class TryFixMixin(_AppBase):
    """Mixed into the app: ``action_try_fix`` and its worker (needs ``state``, ``session``,
    ``selected_finding``, ``results`` of :class:`~mpsprofiler.tui.app.MpsprofApp`)."""

    _trial: Trial | None = None
    try_config: TrialConfig = TUI_CONFIG
    state: RunState
    session: Session

    if TYPE_CHECKING:  # the app's own, used here

        def selected_finding(self) -> Finding | None: ...

    def _experiment_panel(self) -> ExperimentPanel:
        panels = self.query(ExperimentPanel)
        if panels:
            return panels.first()
        panel = ExperimentPanel(id="experiment")
        self.screen_stack[0].mount(panel)
        return panel

    def show_stored_experiments(self) -> None:
        from ..experiment.store import load_experiments

        stored = load_experiments(self.state.run_dir)
        if stored:
            self._experiment_panel().show_stored([str(e.get("headline")) for e in stored[-5:]])

    def action_try_fix(self) -> None:
        from ..experiment.candidates import candidate_for
        from ..experiment.command import TryUsageError, target_from_session

        notify = self.notify
        if self._trial is not None:
            notify("An experiment is running: wait for it, or q to quit (it stops cleanly).", severity="warning")
            return
        if self.state.running:
            notify("The script is still running: try the fix once it has ended (the experiment runs it again).",
                   severity="warning")
            return
        finding = self.selected_finding()
        if finding is None:
            notify("No finding selected (2 shows the findings).", severity="warning")
            return
        from ..diagnosis.facts import collect_facts

        try:
            facts = collect_facts(self.session)
        except Exception:  # noqa: BLE001 - the finding's own facts may still do
            facts = {}
        candidate = candidate_for(finding, facts)
        if candidate is None:
            notify(f"“{finding.title}”: its fix needs a change to the code; mpsprof cannot try it for you.",
                   severity="warning")
            return
        run_dir = self.state.run_dir
        if run_dir is None:
            notify("This run has no run directory to store an experiment in.", severity="warning")
            return
        from ..experiment.store import experiment_dir

        try:  # a symlink planted as RUN_DIR/experiments is refused (a TryUsageError)
            target = target_from_session(self.session)
            out = experiment_dir(Path(run_dir), candidate.text.replace(", ", "_"))
        except TryUsageError as exc:
            notify(str(exc), severity="warning")
            return
        panel = self._experiment_panel()
        config = self.try_config.for_window(candidate.window)
        panel.start(f"Trying {candidate.text}",
                    f"{config.pairs} A/B pairs of `{target.command()}`, {config.steps} steps each, "
                    f"at most {config.budget_s:.0f} s, in {target.cwd or '.'}. The script writes its files "
                    "where it always does. q stops the experiment.")
        trial = Trial(target, candidate.settings, out, config,
                      progress=lambda text: self.call_from_thread(panel.add_line, text),
                      rule=candidate.rule, loader=candidate.loader)
        self._trial = trial
        self.run_worker(lambda: self._run_trial(trial, Path(run_dir), out), thread=True,
                        exclusive=True, group="tryfix", exit_on_error=False)

    def _run_trial(self, trial: Trial, run_dir: Path, out: Path) -> None:
        from ..experiment.store import save_experiment, save_result

        try:
            result = trial.run()
            result["dir"] = str(out)
            save_result(out, result)
            error = save_experiment(run_dir, result)
        except Exception as exc:  # noqa: BLE001 - say it in the panel, keep the app
            result, error = {"headline": f"the experiment failed: {type(exc).__name__}: {exc}", "verdict": "error"}, None
        try:
            self.call_from_thread(self._trial_done, result, error)
        except Exception:
            pass  # the app has closed

    def _trial_done(self, result: dict[str, Any], error: str | None) -> None:
        from ..experiment.command import render_result

        self._trial = None
        verdict = result.get("verdict")
        good = True if verdict == "faster" else (None if verdict in ("same", "incomplete", "unproven") else False)
        text = render_result(result).strip().split("\n", 1)[-1] if "label" in result else str(result.get("headline"))
        self._experiment_panel().finish(text, good)
        results = getattr(self, "results", None)
        if results is not None and "label" in result:
            results.experiments = list(results.experiments) + [result]
        self.notify(str(result.get("headline")), title="Experiment", timeout=12,
                    severity="information" if good is not False else "warning")
        if error:
            self.notify(error, severity="error")

    def stop_experiment(self) -> None:
        """Quit: end the run in progress (the worker then stores what was finished)."""
        if self._trial is not None:
            self._trial.stop()
