"""The TUI's ``p`` key: the selected finding's fix as a diff of the script, shown, saved,
and proven on request.

The same patch as ``mpsprof patch RUN_DIR --rule RULE`` (written to
``RUN_DIR/fix-<rule>.patch``); the user's files are not touched. ``P`` (or the button) in
the patch screen proves it as ``mpsprof patch --prove`` does, with the same trial
(:class:`~mpsprofiler.patch.prove.PatchTrial`) on a thread worker that only posts progress
to the UI thread: the app stays usable, the progress and the verdict show in the screen
and in the experiment panel beside the panels (where they stay once the screen is
closed), and the verdict is stored with the run as the CLI stores it. The trial is kept
where ``t`` keeps its own, so one experiment runs at a time and ``q`` stops either.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Static

if TYPE_CHECKING:
    from textual.app import App

    from ..diagnosis.findings import Finding
    from ..experiment.trial import Trial, TrialConfig
    from ..patch.edits import Fix
    from ..patch.prove import PatchTrial
    from ..session.session import Session
    from .state import RunState
    from .widgets.experiment import ExperimentPanel

    _AppBase = App[None]
else:
    _AppBase = object

PROOF_LINES = 8
"""Progress lines the patch screen keeps (one per run); the experiment panel keeps 30."""
PROOF_ROWS = 12
"""Rows the proof's progress and verdict take at most (``#patch-proof``'s max-height)."""
BOX_SHARE = 0.95
"""The screen's share the box may take (its CSS max-height)."""


class Planned:
    """What the patch screen shows for one finding: the command's text, and the fix and its
    diff when there is a patch to prove."""

    def __init__(self, text: str, fix: Fix | None = None, diff: str = "", root: str = "") -> None:
        self.text, self.fix, self.diff, self.root = text, fix, diff, root


def planned_patch(session: Session, finding: Finding, run_dir: object) -> Planned:
    """The command's text for this one finding (its diff last), or why there is none."""
    import os

    from ..diagnosis import diagnose
    from ..patch.diff import describe, write_patch
    from ..patch.plan import main_script, plan

    script = main_script(session)
    if script is None:
        return Planned("No patch: the run does not name the script it ran (a module run, -m).")
    root = os.path.dirname(script)
    fixes = plan(session, [finding], diagnose(session).facts)
    if not fixes:  # plan() answers every finding (a "not patched" line at least): defensive only
        return Planned(f"No patch for {finding.rule}.")
    text, path, error = write_patch(Path(str(run_dir)) if run_dir else None, fixes[0], root)
    out = describe(fixes[0], text, path, error, root)
    if text and path is not None:
        out += f"\nFrom a shell: mpsprof patch {run_dir} --rule {finding.rule} --prove\n"
        return Planned(out, fixes[0], text, root)
    return Planned(out)


def patch_text(session: Session, finding: Finding, run_dir: object) -> str:
    return planned_patch(session, finding, run_dir).text


def proof_plan(rule: str, config: TrialConfig) -> str:
    """What a proof of ``rule``'s patch runs, in a few words."""
    from ..patch.prove import CRASH_RULES

    if rule in CRASH_RULES:  # the original must crash here, the patched one not: one run each
        return "one run as written, one patched"
    return f"{config.pairs} A/B pairs x {config.steps} steps"


def prove_label(rule: str, config: TrialConfig) -> str:
    return f"Prove it (P): {proof_plan(rule, config)}, at most {config.budget_s:.0f} s"


class PatchScreen(ModalScreen[None]):
    DEFAULT_CSS = """
    PatchScreen { align: center middle; }
    PatchScreen > Vertical {
        width: 100; max-width: 95%; height: auto; max-height: 95%;
        border: thick $accent 60%; background: $surface; padding: 0 1;
    }
    PatchScreen #patch-scroll { height: auto; }
    PatchScreen #patch-proof { height: auto; max-height: 12; }
    PatchScreen #patch-actions { height: 1; margin-top: 1; }
    PatchScreen #prove { height: 1; border: none; min-width: 0; width: auto; padding: 0 1; }
    PatchScreen #patch-hint { width: 1fr; padding: 0 0 0 2; color: $text-muted; }
    """
    BINDINGS = [Binding("escape", "dismiss", "Close"), Binding("q", "dismiss", "Close", show=False),
                Binding("p", "dismiss", "Close", show=False), Binding("P", "prove", "Prove")]

    def __init__(self, text: str, rule: str = "", prove: Callable[[], None] | None = None,
                 label: str = "", proof: tuple[str, list[str], str, bool | None] | None = None) -> None:
        """``prove``: starts the proof (None: nothing to prove); ``proof``: one already
        running or done for this rule (title, progress lines, result, good), shown again."""
        super().__init__()
        self.text, self.rule, self._prove, self.label = text, rule, prove, label
        self.title_text, self.lines, self.result_text, self._good = proof or ("", [], "", None)

    def compose(self) -> ComposeResult:
        styled = Text()
        for line in self.text.splitlines(keepends=True):
            style = ("green" if line.startswith("+") and not line.startswith("+++") else
                     "red" if line.startswith("-") and not line.startswith("---") else
                     "cyan" if line.startswith("@@") else "")
            styled.append(line, style=style)
        with Vertical():
            with VerticalScroll(id="patch-scroll"):
                yield Static(styled, id="patch-text")
            yield Static(id="patch-proof")
            with Horizontal(id="patch-actions"):
                if self._prove is not None:
                    yield Button(self.label, id="prove", variant="primary")
                yield Static("esc close", id="patch-hint")

    def on_mount(self) -> None:
        self._show()

    def on_resize(self) -> None:
        self._fit()

    def _fit(self) -> None:
        """The diff gets the rows the proof's lines and the buttons leave (its own scroll
        bar past that): both stay in view however long the diff is."""
        proof = self.query_one("#patch-proof", Static)
        width = max(20, proof.size.width or 90)
        rows = sum(-(-max(len(line), 1) // width) for line in self._proof_text().plain.splitlines())
        proof.display = rows > 0  # an empty Static still takes a row, which pushed the button out of the box
        below = min(PROOF_ROWS, rows) + 2  # the proof's rows, then a blank row and the button
        inner = int(self.size.height * BOX_SHARE) - 2  # the box's max-height less its border
        self.query_one("#patch-scroll").styles.max_height = max(4, inner - below)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "prove":
            self.action_prove()

    def action_prove(self) -> None:
        if self._prove is None:
            self.notify("Nothing to prove: this finding has no patch.", severity="warning")
            return
        self._prove()

    # -- the proof's progress, posted by the app on the UI thread -----------------------
    def start(self, title: str) -> None:
        self.title_text, self.lines, self.result_text = title, [], ""
        self._show()

    def add_line(self, text: str) -> None:
        self.lines = (self.lines + [text.strip()])[-PROOF_LINES:]
        self._show()

    def finish(self, text: str, good: bool | None) -> None:
        self.result_text, self._good = text.strip(), good
        self._show()
        self.call_after_refresh(self._show_changes)

    def _show_changes(self) -> None:
        """Scroll the diff to its first changed line: the verdict took rows from it, and
        what was proven is the change."""
        scroll = self.query_one("#patch-scroll", VerticalScroll)
        width = max(20, scroll.scrollable_content_region.width)
        row = 0
        for line in self.text.splitlines():
            if line.startswith(("-", "+")) and not line.startswith(("---", "+++")):
                scroll.scroll_to(y=max(0, row - 2), animate=False)
                return
            row += -(-max(len(line), 1) // width)

    def _proof_text(self) -> Text:
        out = Text()
        if not self.title_text:
            return out
        out.append(self.title_text + "\n", style="bold")
        if not self.result_text:  # each run's line while it goes; then the verdict in their place
            out.append("\n".join(self.lines))
            return out
        first, _, rest = self.result_text.partition("\n")
        out.append(first + "\n", style="bold green" if self._good else ("bold yellow" if self._good is None else "bold red"))
        out.append(rest)
        return out

    def _show(self) -> None:
        self.query_one("#patch-proof", Static).update(self._proof_text())
        self._fit()
        for button in self.query("#prove").results(Button):
            button.disabled = bool(self.title_text) and not self.result_text  # one proof at a time


class PatchFixMixin(_AppBase):
    """Mixed into the app: ``action_patch_fix`` and the proof's worker (needs ``state``,
    ``session``, ``selected_finding`` of :class:`~mpsprofiler.tui.app.MpsprofApp`, and
    ``_trial``, ``_experiment_panel`` of :class:`~mpsprofiler.tui.experiment.TryFixMixin`)."""

    state: RunState
    session: Session
    prove_config: TrialConfig | None = None
    """The proof's trial (None: the CLI's ``--prove`` defaults); tests make it short."""
    _proof_shown: tuple[str, list[str], str, bool | None] | None = None
    _proof_rule: str | None = None

    if TYPE_CHECKING:
        _trial: Trial | None

        def selected_finding(self) -> Finding | None: ...

        def _experiment_panel(self) -> ExperimentPanel: ...

    def _proof_config(self) -> TrialConfig:
        from ..patch.command import PROVE_BUDGET_S, PROVE_PAIRS, PROVE_STEPS, proof_config

        return self.prove_config or proof_config(PROVE_STEPS, PROVE_PAIRS, PROVE_BUDGET_S)

    def action_patch_fix(self) -> None:
        finding = self.selected_finding()
        if finding is None:
            self.notify("No finding to patch.", severity="warning")
            return
        try:
            planned = planned_patch(self.session, finding, self.state.run_dir)
        except Exception as exc:  # noqa: BLE001 - a failed patch never takes the TUI down
            self.notify(f"No patch: {type(exc).__name__}: {exc}", severity="error")
            return
        fix = planned.fix
        prove = (lambda: self.prove_patch(planned)) if fix is not None else None
        shown = self._proof_shown if self._proof_rule == finding.rule else None
        label = prove_label(finding.rule, self._proof_config())
        self.push_screen(PatchScreen(planned.text, finding.rule, prove, label, shown))

    def _patch_screens(self) -> list[PatchScreen]:
        return [s for s in self.screen_stack if isinstance(s, PatchScreen) and s.rule == self._proof_rule]

    def prove_patch(self, planned: Planned) -> None:
        """Start the proof of the patch shown (``P`` in the patch screen)."""
        from ..experiment.store import TryUsageError, experiment_dir
        from ..patch.prove import PatchTrial

        fix = planned.fix
        assert fix is not None
        if self._trial is not None:
            self.notify("An experiment is running: wait for it, or q to quit (it stops cleanly).", severity="warning")
            return
        if self.state.running:
            self.notify("The script is still running: prove the patch once it has ended (the proof runs it again).",
                        severity="warning")
            return
        run_dir = self.state.run_dir
        if run_dir is None:
            self.notify("This run has no run directory to store the proof in.", severity="warning")
            return
        try:  # a symlink planted as RUN_DIR/experiments is refused
            out = experiment_dir(Path(run_dir), f"patch-{fix.rule}")
        except TryUsageError as exc:
            self.notify(str(exc), severity="warning")
            return
        config = self._proof_config()
        trial = PatchTrial(self.session, planned.root, fix, planned.diff, Path(run_dir), out, config,
                           progress=lambda text: self.call_from_thread(self._proof_line, text))
        self._trial = trial
        self._proof_rule = fix.rule
        title = f"Proving the patch for {fix.rule}"
        note = (f"{proof_plan(fix.rule, trial.config)}, each side from its own scratch copy in {out}; your files are not "
                "touched. esc: back to the panels (the proof goes on); quitting the app stops it.")
        self._proof_shown = (title, [note], "", None)
        self._experiment_panel().start(title, note)
        for screen in self._patch_screens():
            screen.start(title)
            screen.add_line(note)
        self.run_worker(lambda: self._run_proof(trial, Path(run_dir)), thread=True, exclusive=True,
                        group="patchproof", exit_on_error=False)

    def _run_proof(self, trial: PatchTrial, run_dir: Path) -> None:
        from ..patch.prove import ProofError, store

        errors: list[str] = []
        try:
            result = trial.prove()
            errors = store(run_dir, result)
        except ProofError as exc:
            result = {"headline": f"cannot prove: {exc}", "patch_verdict": "error"}
        except Exception as exc:  # noqa: BLE001 - say it, keep the app
            result = {"headline": f"the proof failed: {type(exc).__name__}: {exc}", "patch_verdict": "error"}
        try:
            self.call_from_thread(self._proof_done, result, errors)
        except Exception:
            pass  # the app has closed

    def _proof_line(self, text: str) -> None:
        self._experiment_panel().add_line(text)
        if self._proof_shown is not None:
            title, lines, result, good = self._proof_shown
            self._proof_shown = (title, (lines + [text.strip()])[-PROOF_LINES:], result, good)
        for screen in self._patch_screens():
            screen.add_line(text)

    def _proof_done(self, result: dict[str, Any], errors: list[str]) -> None:
        from ..experiment.command import render_result
        from ..patch.command import PROVEN

        self._trial = None
        verdict = result.get("patch_verdict")
        good = True if verdict in PROVEN else (None if verdict in ("not proven", "gone") else False)
        if "label" in result:
            text = render_result(result).strip().split("\n", 1)[-1]
            text += f"\n  verdict     {verdict}: stored with the run (`mpsprof report` shows it)"
        else:
            text = str(result.get("headline"))
        self._experiment_panel().finish(text, good)
        if self._proof_shown is not None:
            self._proof_shown = (*self._proof_shown[:2], text, good)
        for screen in self._patch_screens():
            screen.finish(text, good)
        results = getattr(self, "results", None)
        if results is not None and "label" in result:
            results.experiments = list(results.experiments) + [result]
        self.notify(str(result.get("headline")), title="Patch proof", timeout=12,
                    severity="information" if good is not False else "warning")
        for error in errors:
            self.notify(error, severity="error")
