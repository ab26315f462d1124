"""The help screen: every key, grouped, and what the panels show."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Markdown

HELP = """\
# mpsprof: keys

| key | what it does |
|---|---|
| `1` … `9` | switch panel: Overview, Findings, Ops, Memory, Data, Log, Environment, Warnings, Ranks |
| `tab` / `shift+tab` | next / previous panel |
| `r` / `R` | distributed runs: show the next / previous rank in every panel |
| `c` | copy the selected finding's fix to the clipboard |
| `e` | export a report (Markdown and HTML) into the run directory |
| `t` | try the selected finding's fix (A/B runs of the script, once it has ended); the result shows on the right and is stored with the run |
| `s` | stop the script (Ctrl-C, then terminate after 5 s) |
| `q` | quit (asks first while the script runs; stops it before leaving) |
| `ctrl+p` | command palette: every action by name |
| `?` | this help |

**Findings:** `↑` `↓` pick a finding; its evidence and fix show on the right.
**Ops:** click a column header or press `o` to sort; `f` shows problems only / all ops.
**Log:** scroll up to stop following; `end` follows again. The mouse works everywhere.
**Ranks** (distributed runs only): every rank side by side, the straggler marked; `enter`
on a row shows that rank. The header's rank badge says which rank the panels show (click
it for the next); findings and the Log are always the whole job's.

The script runs exactly as `python script.py` would; its output is in the Log panel and in
`output.log` in the run directory. Findings are re-evaluated every second.

_Press `escape` or `?` to close._
"""


class HelpScreen(ModalScreen[None]):
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll {
        width: 90;
        max-width: 95%;
        height: auto;
        max-height: 90%;
        border: thick $accent 60%;
        background: $surface;
        padding: 0 1;
    }
    """
    BINDINGS = [
        Binding("escape", "dismiss", "Close"),
        Binding("question_mark", "dismiss", "Close", show=False),
        Binding("q", "dismiss", "Close", show=False),
    ]

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Markdown(HELP, id="help-text")

    def action_dismiss(self) -> None:  # type: ignore[override]
        self.dismiss(None)
