"""Environment: the facts the probe collected, what ``mpsprof doctor`` makes of them, and
the state of the rule files (a broken user rule says so here instead of failing)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, VerticalScroll
from textual.widget import Widget
from textual.widgets import Static

from ...events.payloads import EnvFields
from ...units import fmt_bytes
from ..safe import finite, fmt_count, raw
from ..state import RunState
from .quiet import quiet_update

STATUS_STYLE = {"ok": ("✔ ok", "green"), "warn": ("▲ warn", "yellow"), "fail": ("✖ fail", "bold red"), "info": ("● info", "blue")}
ENV_ROWS = (
    ("os", "OS"),
    ("macos_version", "macOS"),
    ("machine", "architecture"),
    ("chip", "chip"),
    ("apple_silicon", "Apple silicon"),
    ("rosetta", "under Rosetta"),
    ("cores_logical", "cores (logical)"),
    ("cores_physical", "cores (physical)"),
    ("cores_performance", "performance cores"),
    ("memory_total", "memory"),
    ("python", "Python"),
    ("python_executable", "interpreter"),
    ("torch", "torch"),
    ("torch_cuda", "torch CUDA"),
    ("mps_built", "MPS built"),
    ("mps_available", "MPS available"),
    ("cuda_available", "CUDA available"),
    ("cuda_device_name", "CUDA device"),
    ("torch_threads", "torch threads"),
)


class EnvironmentPanel(Widget):
    DEFAULT_CSS = """
    EnvironmentPanel VerticalScroll { height: 1fr; }
    EnvironmentPanel .box { border: round $primary 40%; border-title-color: $text-accent; padding: 0 1; height: auto; }
    EnvironmentPanel #env-top { height: auto; }
    EnvironmentPanel #env-run { width: 1fr; height: 100%; }
    EnvironmentPanel #env-facts { width: 1fr; }
    """

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._key: object = None

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            with Horizontal(id="env-top"):
                yield self._box("env-run", "Run")
                yield self._box("env-facts", "Environment")
            yield self._box("env-doctor", "What doctor says")
            yield self._box("env-rules", "Rules")

    @staticmethod
    def _box(name: str, title: str) -> Static:
        box = Static(id=name, classes="box")
        box.border_title = title
        return box

    def update_state(self, state: RunState) -> None:
        session = state.session
        key = (id(session), id(session.env), len(session.env), len(session.run), len(state.rule_errors), state.notes,
               state.status, session.events_seen // 500, bool(session.model))
        if key == self._key:
            return
        self._key = key
        quiet_update(self.query_one("#env-run", Static), run_table(state))
        quiet_update(self.query_one("#env-facts", Static), env_table(session.env))
        quiet_update(self.query_one("#env-doctor", Static), doctor_table(doctor_env(session.env, state)))
        quiet_update(self.query_one("#env-rules", Static), rules_text(state))


def run_table(state: RunState) -> Table:
    run = state.session.run
    table = Table.grid(padding=(0, 2))
    table.add_column(style="dim", no_wrap=True)
    table.add_column(overflow="fold")
    argv = run.get("argv")
    table.add_row("script", raw(run.get("script") or "–"))
    table.add_row("argv", raw(" ".join(str(a) for a in argv) if isinstance(argv, list) and argv else (argv or "–")))
    table.add_row("working dir", raw(run.get("cwd") or "–"))
    table.add_row("run dir", raw(state.run_dir or run.get("run_dir") or "not recorded"))
    table.add_row("mode", raw(run.get("mode") or "–"))
    table.add_row("status", raw(state.status_text()))
    ex = state.session.exit
    if ex is not None:
        how = f"signal {ex.signal_name}" if ex.signal_name else f"exit status {ex.returncode}"
        table.add_row("ended", raw(how + (" (stopped from mpsprof)" if ex.stopped_by_user else "")))
    model = state.session.model
    if model:
        table.add_row("model", raw(f"{model.get('device') or '?'} · {model.get('optimizer') or 'no optimizer seen'}"))
    unreadable = state.session.unknown_events
    table.add_row("events", raw(fmt_count(state.session.events_seen) + (f" ({unreadable} unreadable)" if unreadable else "")))
    if run.get("mpsprof"):
        table.add_row("mpsprof", raw(run["mpsprof"]))
    if state.notes:
        table.add_row("recording", Text(state.notes, style="yellow"))
    for problem in state.session.recording_problems() if ex is not None else ():
        table.add_row("incomplete", Text(problem, style="yellow"))
    return table


def _value(key: str, value: Any) -> Text:
    if value is None:
        return Text("–", style="dim")
    if isinstance(value, bool):
        return Text("yes" if value else "no", style="green" if value else "")
    if key == "memory_total" and finite(value) is not None:
        return Text(fmt_bytes(value))
    return Text(str(value))


def env_table(env: EnvFields) -> Table | Text:
    if not env:
        return Text("not reported yet", style="dim")
    table = Table.grid(padding=(0, 2))
    table.add_column(style="dim", no_wrap=True)
    table.add_column(overflow="fold")
    fields: Mapping[str, Any] = env  # read by the names in ENV_ROWS
    for key, label in ENV_ROWS:
        if key in fields and not (fields[key] is None and key in ("macos_version", "cores_performance", "cuda_device_name", "torch_cuda")):
            table.add_row(label, _value(key, fields[key]))
    variables = env.get("pytorch_env") or {}
    if variables:
        items = variables.items() if isinstance(variables, dict) else []
        table.add_row("variables", raw("  ".join(f"{k}={v}" for k, v in sorted(items, key=str)) or variables))
    else:
        table.add_row("variables", Text("no PYTORCH_* / thread variables set", style="dim"))
    return table


def doctor_env(env: EnvFields, state: RunState) -> EnvFields:
    """The run's environment with the facts ``mpsprof doctor`` adds to it (NumPy's version,
    whether an NVIDIA driver is loaded), so the panel's checks are doctor's with the same
    verdicts: without them a CUDA build of torch on a machine with no driver read "check
    nvidia-smi" here and "no NVIDIA driver" in doctor. Known only on the machine that ran
    the script with this interpreter: a live run, or a recording made with this Python;
    another machine's recording is judged on what it recorded."""
    if not env:
        return env
    import sys

    from ...diagnosis.analyzers.threads import others_busy, workers_busy

    full: dict[str, Any] = dict(env)
    # the thread check is the thread rule's judgement over the run's own figures (doctor's
    # check_threads): the count the script set, busy workers and other programs as measured
    seen = state.session.model.get("torch_threads")  # set by the script after start-up: the rule's count
    if isinstance(seen, int) and seen > 0:
        full["torch_threads"] = seen
    try:
        full["workers_busy_cores"] = workers_busy(state.session)  # 0 when not measured, as in the rule
    except Exception:  # noqa: BLE001 - a measuring bug must not break the panel
        full.pop("workers_busy_cores", None)
    others = others_busy(state.session)  # the run's own measurement: the thread rule's figure
    if others is not None:
        full["others_busy_cores"] = others[0]
        full["others_top"] = [dict(t) for t in (state.session.others or {}).get("top") or []]
    here = state.live or env.get("python_executable") == sys.executable
    if not here:
        return cast(EnvFields, full)
    from ... import doctor

    if "numpy" not in full:
        full["numpy"] = doctor._installed_version("numpy")
    if "nvidia_driver" not in full:
        full["nvidia_driver"] = doctor.nvidia_driver_present()
    return cast(EnvFields, full)


def doctor_table(env: EnvFields) -> Table | Text:
    if not env:
        return Text("waiting for the environment facts…", style="dim")
    from ...doctor import run_checks

    try:
        checks = run_checks(env)
    except Exception as exc:  # noqa: BLE001 - a doctor bug must not break the panel
        return Text(f"doctor failed: {type(exc).__name__}: {exc}", style="red")
    table = Table(box=None, show_header=False, padding=(0, 2, 0, 0), expand=True)
    table.add_column(no_wrap=True)
    table.add_column(no_wrap=True, style="bold")
    table.add_column(ratio=1, overflow="fold")
    for check in checks:
        label, style = STATUS_STYLE.get(check.status, (check.status, ""))
        body = inline_code(check.detail)
        if check.fix:
            body.append("\nfix: ", style="bold")
            body.append_text(inline_code(check.fix))
        table.add_row(Text(label, style=style), raw(check.title), body)
    return table


def inline_code(text: str) -> Text:
    """Backticked spans of Markdown in colour (doctor's fixes are Markdown)."""
    out = Text()
    for i, part in enumerate(text.split("`")):
        out.append(part, style="cyan" if i % 2 else "")
    return out


def rules_text(state: RunState) -> Group | Text:
    if not state.rule_errors:
        return Text("all rule files loaded", style="green")
    lines = [Text(f"{len(state.rule_errors)} problem(s) in rule files:", style="yellow")]
    for error in state.rule_errors[:50]:
        level = getattr(error, "level", "error")
        lines.append(Text(str(error), style="red" if level == "error" else "dim"))
    return Group(*lines)
