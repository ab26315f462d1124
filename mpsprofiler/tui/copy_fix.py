"""``c`` in the TUI: what goes to the clipboard, and what the user is told.

A fix is prose around code; the user wants to paste the code into the script, so the code
blocks are copied (the whole text only when the fix has none). Textual copies through the
terminal's OSC 52 escape (``App.copy_to_clipboard``), which no terminal answers: many
ignore it (tmux without ``set-clipboard``, Terminal.app, most SSH setups), so "Copied" would
be a guess. The text is also written to ``RUN_DIR/fix-<rule>.txt``, and the message says
both, so the fix is never lost.
"""

from __future__ import annotations

from pathlib import Path

from ..rundir import fix_file, write_text_atomic


def fix_to_copy(fix: str) -> str:
    """The code blocks of a fix's Markdown (fenced or indented), joined by a blank line;
    the whole text when it holds no code."""
    from markdown_it import MarkdownIt

    blocks = [t.content.rstrip("\n") for t in MarkdownIt("commonmark").parse(fix)
              if t.type in ("fence", "code_block") and t.content.strip()]
    return "\n\n".join(blocks) + "\n" if blocks else fix.strip() + "\n"


def save_fix(run_dir: Path | None, rule: str, text: str) -> tuple[Path | None, str | None]:
    """Write the copied text beside the run; (path, None), or (None, why not)."""
    if run_dir is None:
        return None, "this run has no run directory"
    path = fix_file(run_dir, rule)
    error = write_text_atomic(path, text)
    return (None, error) if error else (path, None)


def copy_message(title: str, code_only: bool, saved: Path | None, error: str | None) -> str:
    """What ``c`` says: sent (never "copied": OSC 52 cannot confirm), and where the file is."""
    what = "The fix's code" if code_only else "The fix"
    where = f"Also saved in {saved}." if saved is not None else f"Not saved to a file: {error}."
    return (f"{what} for “{title}” was sent to the terminal's clipboard (OSC 52; some terminals "
            f"ignore it). {where}")
