"""Quit while the script runs? Leaving stops it, so ask first."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Label, Static


class ConfirmQuitScreen(ModalScreen[bool]):
    DEFAULT_CSS = """
    ConfirmQuitScreen { align: center middle; }
    ConfirmQuitScreen > Vertical {
        width: 64;
        height: auto;
        border: thick $warning 60%;
        background: $surface;
        padding: 1 2;
    }
    ConfirmQuitScreen #confirm-title { text-style: bold; margin-bottom: 1; }
    ConfirmQuitScreen #confirm-text { color: $text-muted; margin-bottom: 1; }
    ConfirmQuitScreen Horizontal { height: auto; align-horizontal: right; }
    ConfirmQuitScreen Button { margin-left: 2; }
    """
    BINDINGS = [
        Binding("y", "answer(True)", "Stop and quit"),
        Binding("n,escape", "answer(False)", "Cancel"),
    ]

    def __init__(self, script: str) -> None:
        super().__init__()
        self.script = script

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label("The script is still running", id="confirm-title")
            yield Static(
                f"Quitting stops {self.script} first (Ctrl-C, then terminate after 5 s). "
                "The recording and findings so far are kept.",
                id="confirm-text",
                markup=False,  # the script's name is the user's text
            )
            with Horizontal():
                yield Button("Cancel (n)", id="cancel")
                yield Button("Stop and quit (y)", id="quit", variant="error")

    def on_mount(self) -> None:
        self.query_one("#cancel", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.dismiss(event.button.id == "quit")

    def action_answer(self, value: bool) -> None:
        self.dismiss(value)
