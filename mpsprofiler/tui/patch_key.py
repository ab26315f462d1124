"""The TUI's ``p`` key: the selected finding's fix as a diff of the script, shown and saved.

The same patch as ``mpsprof patch RUN_DIR --rule RULE`` (written to
``RUN_DIR/fix-<rule>.patch``); the user's files are not touched. Proving it is
``mpsprof patch --prove`` (the screen says so).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

if TYPE_CHECKING:
    from textual.app import App

    from ..diagnosis.findings import Finding
    from ..session.session import Session
    from .state import RunState

    _AppBase = App[None]
else:
    _AppBase = object


def patch_text(session: Session, finding: Finding, run_dir: object) -> str:
    """The command's text for this one finding (its diff last), or why there is none."""
    from pathlib import Path

    from ..diagnosis import diagnose
    from ..patch.diff import describe, write_patch
    from ..patch.plan import main_script, plan

    script = main_script(session)
    if script is None:
        return "No patch: the run does not name the script it ran (a module run, -m)."
    import os

    root = os.path.dirname(script)
    fixes = plan(session, [finding], diagnose(session).facts)
    if not fixes:  # plan() answers every finding (a "not patched" line at least): defensive only
        return f"No patch for {finding.rule}."
    text, path, error = write_patch(Path(str(run_dir)) if run_dir else None, fixes[0], root)
    out = describe(fixes[0], text, path, error, root)
    if text and path is not None:
        out += f"\nProve it with: mpsprof patch {run_dir} --rule {finding.rule} --prove\n"
    return out


class PatchScreen(ModalScreen[None]):
    DEFAULT_CSS = """
    PatchScreen { align: center middle; }
    PatchScreen > VerticalScroll {
        width: 100; max-width: 95%; height: auto; max-height: 90%;
        border: thick $accent 60%; background: $surface; padding: 0 1;
    }
    """
    BINDINGS = [Binding("escape", "dismiss", "Close"), Binding("q", "dismiss", "Close", show=False),
                Binding("p", "dismiss", "Close", show=False)]

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text

    def compose(self) -> ComposeResult:
        from rich.text import Text

        styled = Text()
        for line in self.text.splitlines(keepends=True):
            style = ("green" if line.startswith("+") and not line.startswith("+++") else
                     "red" if line.startswith("-") and not line.startswith("---") else
                     "cyan" if line.startswith("@@") else "")
            styled.append(line, style=style)
        with VerticalScroll():
            yield Static(styled, id="patch-text")


class PatchFixMixin(_AppBase):
    """Mixed into the app: ``action_patch_fix`` (needs ``state``, ``session`` and
    ``selected_finding`` of :class:`~mpsprofiler.tui.app.MpsprofApp`)."""

    state: RunState
    session: Session

    if TYPE_CHECKING:

        def selected_finding(self) -> Finding | None: ...

    def action_patch_fix(self) -> None:
        finding = self.selected_finding()
        if finding is None:
            self.notify("No finding to patch.", severity="warning")
            return
        try:
            text = patch_text(self.session, finding, self.state.run_dir)
        except Exception as exc:  # noqa: BLE001 - a failed patch never takes the TUI down
            self.notify(f"No patch: {type(exc).__name__}: {exc}", severity="error")
            return
        self.push_screen(PatchScreen(text))
