"""The help screen: every key, grouped, and what the panels show (their part from ``..panels``)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Markdown

from ..panels import help_keys_row, help_notes

HELP = f"""\
# mpsprof: keys

| key | what it does |
|---|---|
{help_keys_row()}
| `tab` / `shift+tab` | next / previous panel |
| `pgdn` `pgup` `home` `end` `↑` `↓` `j` `k` | scroll the panel (Findings: the selected finding's detail, down to its Fix) |
| `r` / `R` | distributed runs: show the next / previous rank in every panel |
| `c` | copy the selected finding's fix code to the clipboard (OSC 52) and save it as RUN_DIR/fix-RULE.txt |
| `e` | export a report (Markdown and HTML) into the run directory |
| `t` | try the selected finding's fix (A/B runs of the script, once it has ended); the result shows on the right and is stored with the run |
| `p` | the selected finding's fix as a diff of the script (saved as RUN_DIR/fix-RULE.patch); there `P` proves it (A/B runs in the background, verdict stored with the run) |
| `s` | stop the script (Ctrl-C, then terminate after 5 s) |
| `q` | quit (asks first while the script runs; stops it before leaving) |
| `ctrl+p` | command palette: every action by name |
| `?` | this help |

{help_notes()}

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
        Binding("j", "scroll('down')", show=False),
        Binding("k", "scroll('up')", show=False),
    ]

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Markdown(HELP, id="help-text")

    def action_scroll(self, how: str) -> None:
        pane = self.query_one(VerticalScroll)
        (pane.scroll_down if how == "down" else pane.scroll_up)(animate=False)

    def action_dismiss(self) -> None:  # type: ignore[override]
        self.dismiss(None)
