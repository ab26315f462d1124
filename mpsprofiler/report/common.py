"""What every human-readable report shows, as plain rows: renderers only format them.

Markdown and HTML list the same figures in the same order, so a run pasted into an
issue and the same run opened in a browser never disagree. Values here are plain,
unescaped text; each renderer escapes them for its own syntax.
"""

from __future__ import annotations

import datetime as _dt
import shlex
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .. import __version__
from ..diagnosis.analyzers.common import start_method
from ..diagnosis.findings import FindingDoc, severity_rank
from ..events.payloads import Frame
from ..redact import redact_argv
from ..session.exit_words import exit_words
from ..session.loaders import dataset_text
from ..session.session import Session
from ..session.steps import signal_words
from ..session.summary import rank_rows
from ..units import finite, fmt_bytes, fmt_pct, fmt_seconds, raw
from .paths import display_paths

if TYPE_CHECKING:
    from ..results import DeviceDoc, ExitDoc, MemoryDoc, OpsCostDoc, Results, StepsDoc, Summary

MAX_TABLE_ROWS = 25
"""Op tables and warning lists are cut here: a report is read, not searched."""


@dataclass
class Table:
    """A titled table of plain-text cells (``rows`` are lists as long as ``columns``)."""

    title: str
    columns: list[str]
    rows: list[list[str]]
    note: str = ""
    numeric: set[int] = field(default_factory=set)
    code: set[int] = field(default_factory=set)
    """Columns shown as code (op names, source lines)."""


# -- findings -----------------------------------------------------------------
def finding_dicts(results: Results) -> list[FindingDoc]:
    """Findings as their documents (what ``summary.json`` holds, typed), most severe first
    (stable within a severity)."""
    out = [f.to_dict() for f in results.findings]
    return sorted(out, key=lambda d: -severity_rank(str(d.get("severity"))))


def counts_text(findings: Iterable[FindingDoc]) -> str:
    """``1 critical, 2 warnings`` (empty when there are none)."""
    parts = []
    for sev, n in severity_counts(findings).items():
        if n:
            parts.append(f"{n} {sev}s" if sev == "warning" and n > 1 else f"{n} {sev}")
    return ", ".join(parts)


def severity_counts(findings: Iterable[FindingDoc]) -> dict[str, int]:
    counts = {"critical": 0, "warning": 0, "info": 0}
    for f in findings:
        sev = str(f.get("severity"))
        counts[sev] = counts.get(sev, 0) + 1
    return counts


# -- headline -----------------------------------------------------------------
def status_text(summary: Summary, session: Session | None = None) -> str:
    """The run's status for a title. ``session`` says whether the run was read back from disk:
    then "running" (no exit event) is never true, and the title says how the recording ends."""
    return _status_only(summary, session) + (", recording incomplete" if recording_problems(summary) else "")


def badge_class(summary: Summary, session: Session | None = None) -> str:
    """The status word for styling (HTML badge): a read-back recording without exit is "stopped"."""
    status = str(summary.get("status") or "running")
    return "stopped" if status == "running" and ended_without_exit(summary, session) else status


def ended_without_exit(summary: Summary, session: Session | None) -> bool:
    return session is not None and session.read_back and str(summary.get("status") or "running") == "running"


def ended_text(summary: Summary, session: Session | None = None) -> str:
    """How a read-back recording without an exit event ends: cut by ``--max-steps``/``--max-seconds``
    (the cut event was written, the exit never came), or simply ended (the launcher died, the file
    was copied mid-run). Where no steps event arrived but op samples or loss readings name a
    step (the process killed before the probe's half-second flush), that step, not "0 steps"."""
    cut = summary.get("cut")
    if isinstance(cut, dict) and isinstance(cut.get("steps"), int):
        return f"cut after {cut['steps']} steps, ended without an exit record"
    steps = summary.get("steps")
    count = steps.get("count") if isinstance(steps, dict) else None
    n = count if isinstance(count, int) and not isinstance(count, bool) else 0
    seen = session.last_step_seen if session is not None else None
    if not n and seen is not None:
        return f"ended without an exit record after step {seen}, the last the recording shows"
    return f"ended without an exit record after {n} step{'s' if n != 1 else ''}"


def _status_only(summary: Summary, session: Session | None = None) -> str:
    if ended_without_exit(summary, session):
        return ended_text(summary, session)
    status = str(summary.get("status") or "?")
    exit_info: ExitDoc | dict[str, Any] = summary.get("exit") or {}
    if exit_info.get("stopped_by_user"):
        return "stopped by the user"
    return exit_words(status, exit_info.get("returncode"), exit_info.get("signal"), summary.get("crash"))


def recording_problems(summary: Summary) -> list[str]:
    """Why the recording misses part of the run (summary ``recording.problems``)."""
    recording = summary.get("recording")
    problems = recording.get("problems") if isinstance(recording, dict) else None
    return [str(p) for p in problems] if isinstance(problems, list) else []


def started_text(session: Session) -> str:
    started: Any = session.run.get("started")  # a recording may hold anything: float() decides
    try:
        when = _dt.datetime.fromtimestamp(float(started), tz=_dt.timezone.utc)
    except (TypeError, ValueError, OverflowError, OSError):
        return ""
    return when.strftime("%Y-%m-%d %H:%M UTC")


def command_line(session: Session) -> str:
    """How the script was run, as a shell line (``mpsprof run`` + the script's argv)."""
    argv = session.run.get("argv")
    if not isinstance(argv, list) or not argv:
        argv = [session.script]
    module = "-m " if session.run.get("module") else ""
    return "mpsprof run " + module + " ".join(shlex.quote(str(a)) for a in redact_argv(argv))


def device_text(summary: Summary) -> str:
    device: DeviceDoc | dict[str, Any] = summary.get("device") or {}
    kind = str(device.get("kind") or "?")
    name = device.get("name")
    return f"{kind} ({name})" if name and str(name).lower() != kind else kind


# -- summary figures ------------------------------------------------------------
def summary_rows(summary: Summary, session: Session | None = None) -> list[tuple[str, str]]:
    steps: StepsDoc | dict[str, Any] = summary.get("steps") or {}  # {}: the bare summary of a failed build
    mem: MemoryDoc | dict[str, Any] = summary.get("memory") or {}
    device: DeviceDoc | dict[str, Any] = summary.get("device") or {}
    rows: list[tuple[str, str]] = [
        ("Status", status_text(summary, session)),
        ("Duration", fmt_seconds(summary.get("duration_s"))),
        ("Device", device_text(summary)),
    ]
    if device.get("parameters"):
        params = finite(device["parameters"])
        rows.append(("Model parameters", f"{int(params):,}" if params is not None else raw(device["parameters"])))
    count = steps.get("count") or 0
    rows.append(("Steps", f"{count} ({warmup_words(steps)}, {steps.get('steady', 0)} steady)"
                 + f", counted from {signal_words(steps.get('mode'), steps.get('framework'), steps.get('fetched_ahead'), steps.get('optimizers'))}"))
    rows.append(("Median step time", fmt_seconds(steps.get("median_s"))))
    rows.append(("p90 step time", fmt_seconds(steps.get("p90_s"))))
    sps = steps.get("steps_per_s")
    rows.append(("Steps per second", f"{sps:.2f}" if isinstance(sps, (int, float)) else "–"))
    rows.append(("Data-wait share", _share(steps.get("data_wait_share"), "of steady step time")))
    if steps.get("warmup_cost_s"):
        rows.append(("Warm-up cost", fmt_seconds(steps.get("warmup_cost_s")) + " over steady speed"))
    peak_rss = mem.get("peak_rss")
    with_workers = mem.get("peak_rss_with_workers")
    rss = fmt_bytes(peak_rss)
    if with_workers and peak_rss and with_workers > peak_rss:
        rss += f" ({fmt_bytes(with_workers)} with DataLoader workers)"
    rows.append(("Peak RSS", rss))
    if mem.get("peak_device_allocated") is not None or mem.get("peak_device_cached") is not None:
        rows.append(("Peak device allocated", fmt_bytes(mem.get("peak_device_allocated"))))
        rows.append(("Peak device cache", fmt_bytes(mem.get("peak_device_cached"))))
    if mem.get("device_limit"):
        rows.append(("Device memory limit", fmt_bytes(mem.get("device_limit"))))
    if mem.get("min_system_available") is not None:
        rows.append(("Lowest system available", fmt_bytes(mem.get("min_system_available"))))
    if mem.get("peak_swap_used"):
        rows.append(("Peak swap used", fmt_bytes(mem.get("peak_swap_used"))))
    ops_cost = ops_cost_words(summary)
    if ops_cost:
        rows.append(("Op accounting cost", ops_cost))
    return rows


def ops_cost_words(summary: Summary | Mapping[str, Any]) -> str:
    """What op accounting cost the run, ``3 sampled steps, 72 ms (0.8% of the training time),
    converged``, or "" where it sampled nothing (``--no-ops``, no steps, a damaged summary).
    The reports' row and the end-of-run summary's line: the run says what it cost."""
    ops: OpsCostDoc | dict[str, Any] = summary.get("ops") or {}
    cost = ops.get("cost_s") if isinstance(ops, dict) else None
    if not isinstance(ops, dict) or not isinstance(cost, (int, float)):
        return ""
    share = ops.get("cost_share")
    text = f"{ops.get('sampled_steps')} sampled steps, {cost * 1e3:.0f} ms"
    text += f" ({share * 100:.2g}% of the training time)" if isinstance(share, (int, float)) else ""
    return text + (", converged" if ops.get("converged") else "")


def _share(value: Any, suffix: str) -> str:
    return f"{fmt_pct(value)} {suffix}" if isinstance(value, (int, float)) else "–"


# -- environment ----------------------------------------------------------------
def environment_rows(session: Session) -> list[tuple[str, str]]:
    env = session.env
    rows: list[tuple[str, str]] = []

    def add(label: str, value: Any) -> None:
        if value not in (None, "", [], {}):
            rows.append((label, str(value)))

    python = env.get("python")
    add("Python", display_paths(python) if isinstance(python, str) else python)  # a venv in ~: shown so
    torch = env.get("torch")
    if torch and env.get("torch_cuda"):
        torch = f"{torch} (CUDA {env['torch_cuda']})"
    add("torch", torch)
    chip = env.get("chip")
    if env.get("rosetta"):
        chip = f"{chip or '?'} (Python under Rosetta)"
    add("Chip", chip)
    add("Device", session.model.get("device_name") or session.device_kind)
    add("CUDA GPU", env.get("cuda_device_name"))
    os_name = env.get("os")
    if env.get("macos_version") and "macOS" not in str(os_name):
        os_name = f"{os_name} (macOS {env['macos_version']})"
    add("OS", os_name)
    add("Machine", env.get("machine"))
    cores = [f"{env['cores_logical']} logical"] if env.get("cores_logical") else []
    if env.get("cores_physical"):
        cores.append(f"{env['cores_physical']} physical")
    if env.get("cores_performance"):
        cores.append(f"{env['cores_performance']} performance")
    add("CPU cores", ", ".join(cores))
    if env.get("memory_total"):
        add("Memory", fmt_bytes(env.get("memory_total")))
    add("torch threads", env.get("torch_threads"))
    if env.get("mps_built") is not None:
        add("MPS", f"built: {_yes(env.get('mps_built'))}, available: {_yes(env.get('mps_available'))}")
    if env.get("cuda_available") is not None:
        count = env.get("cuda_device_count")
        add("CUDA", f"available: {_yes(env.get('cuda_available'))}" + (f", {count} device(s)" if count else ""))
    return rows


def env_vars(session: Session) -> list[tuple[str, str]]:
    """``PYTORCH_*`` and thread variables as set in the training process."""
    variables = session.env.get("pytorch_env")
    if not isinstance(variables, dict):
        return []
    return [(str(k), str(v)) for k, v in sorted(variables.items())]


def _yes(value: Any) -> str:
    return "yes" if value else ("no" if value is not None else "?")


# -- DataLoaders, warnings --------------------------------------------------------
DATALOADER_COLUMNS = ["#", "Dataset", "batch_size", "num_workers", "prefetch_factor", "pin_memory",
                      "persistent_workers", "Batches", "Start method"]
DATALOADER_KEYS = ("dataset", "batch_size", "num_workers", "prefetch_factor", "pin_memory", "persistent_workers",
                   "len", "multiprocessing_context")
"""The ``dataloader`` event fields of those columns after ``#`` (tests check them against DataLoaderFields)."""


def dataloader_table(session: Session) -> Table | None:
    if not session.dataloaders:
        return None
    rows = [[str(dl.get("id", key))] + [cell_text(dataset_text(dl) if k == "dataset" else
                                                  start_method_text(session, dl) if k == "multiprocessing_context"
                                                  else dl.get(k))
                                        for k in DATALOADER_KEYS]
            for key, dl in sorted(session.dataloaders.items())]
    return Table("DataLoader", list(DATALOADER_COLUMNS), rows, numeric={0, 2, 3, 4, 7})


def start_method_text(session: Session, dl: Any) -> str | None:
    """How the loader's workers start: its own ``multiprocessing_context``, else the method
    the script fixed for the process or the platform's default, said so (a loader with
    workers showed "–" there, as if they started no way at all); none without workers."""
    own = dl.get("multiprocessing_context")
    if own:
        return str(own)
    method = start_method(session, dl)
    if method is None:
        return None
    return f"{method} (set by the script)" if dl.get("start_method_set") else f"{method} (default)"


LOADER_BOUND_WORDS = {
    "waiting": "waiting (I/O, sleep, GIL-free decoding): workers help regardless of cores",
    "cpu": "CPU work: workers help only on free cores",
    "ipc": "indexing memory: index whole batches, workers would not help",
    "contention": "waiting for a busy CPU: the machine is the limit",
    "handoff": "cheap batches: receiving one from a worker would cost as much, workers would not help",
    "sampler": "drawing indices from the sampler, in the training process: workers would not help",
    "unknown": "not measured (run too short or recorded by an older mpsprof)",
}


LOADER_BOUND_SHORT = {"waiting": "waits (I/O, sleep)", "cpu": "CPU-bound", "ipc": "indexes memory",
                      "contention": "waits for a busy CPU", "unknown": "not measured",
                      "handoff": "cheap batches", "sampler": "slow sampler"}
WORKERS_KEEP_UP = ("taking batches in from workers that keep up: more workers would not help",
                   "workers keep up")  # fmt: skip
"""'ipc' with workers: the wait is receiving batches, not building them (words, short)."""
WORKERS_RESTART = ("its workers' start-up, again at every epoch: persistent_workers=True, not fewer workers",
                   "workers restart")  # fmt: skip
"""A loader whose waiting is its workers' start-ups (``stall_advice`` ``restarts``), whatever
its loading is: the table says that, as the finding does (words, short)."""
CORE_WAIT = ("waiting, most of it for a free CPU core (the machine is busy): workers help regardless of cores",
             "waits (for a core)")  # fmt: skip
"""'waiting' whose waiting was mostly run-queue time (``figures_loading`` ``waiting_core``)."""


def _bound_words(f: dict[str, Any], short: bool) -> str:
    bound = str(f["loader_bound"])
    if f.get("stall_advice") == "restarts":
        return WORKERS_RESTART[1 if short else 0]
    if bound == "waiting" and f.get("figures_loading") == "waiting_core":
        return CORE_WAIT[1 if short else 0]
    if bound == "ipc" and f.get("num_workers"):
        return WORKERS_KEEP_UP[1 if short else 0]
    return (LOADER_BOUND_SHORT if short else LOADER_BOUND_WORDS).get(bound, bound)


def _loader_facts(session: Session) -> dict[str, Any] | None:
    try:
        from ..diagnosis.analyzers.dataloader import dataloader_facts

        f = dataloader_facts(session)
    except Exception:  # noqa: BLE001 - a view never fails on a figure
        return None
    if f.get("loader_bound") is None or f.get("data_wait_ms") is None:
        return None
    return f


def loader_brief(session: Session) -> list[str]:
    """Two short lines for the Data panel: what the loader does and its figures. An
    evaluation loader's say what evaluation waited between the steps, as the reports'
    table and the finding do: "per step: wait 31 ms" showed its waits spread over
    training steps that never waited for it."""
    f = _loader_facts(session)
    if f is None:
        return []
    role = _loader_role(f)
    first = f"{'evaluation loader' if role == 'evaluation' else 'loader'} {_bound_words(f, short=True)}"
    if f.get("suggested_num_workers") is not None:
        first += f" · suggested num_workers={f['suggested_num_workers']} (now {f.get('num_workers')})"
    if role == "evaluation" and f.get("eval_wait_s") is not None:
        second = (f"evaluation waited {_eval_wait_words(f)} between training steps, not per step"
                  f" · per batch: load {_ms(f.get('load_ms'))}")  # fmt: skip
    else:
        second = (f"per step: wait {_ms(f.get('data_wait_ms'))} + compute {_ms(f.get('compute_ms'))}"
                  f" · per batch: load {_ms(f.get('load_ms'))}")  # fmt: skip
    if f.get("load_cpu_ms") is not None:
        second += f" ({_ms(f.get('load_cpu_ms'))} CPU)"
    if role == "evaluation":
        second += f", use {_ms(f.get('train_ms'))}"
    return [first, second]


def _loader_role(f: Mapping[str, Any]) -> str:
    """``training`` or ``evaluation``: whose waits the judged loader's are (``stall_subject``)."""
    return "evaluation" if f.get("stall_subject") == "evaluation" else "training"


def _eval_wait_words(f: Mapping[str, Any]) -> str:
    """"1.9 s for 9 batches (43% of the steps' time)": an evaluation loader's waits in all."""
    return (f"{float(f['eval_wait_s']):.1f} s for {f.get('eval_batches')} batches "
            f"({fmt_pct(f.get('eval_wait_share'))} of the steps' time)")


LOADER_ROLE_HEADING = {"training": "Training loader", "evaluation": "Evaluation loader"}
"""The heading of the reports' loader table, by the role of the loader the rules judged
(``stall_subject``: diagnosis/analyzers/dataloader.py): a table headed "Training loader"
showed an evaluation loader's figures."""


def loader_rows(session: Session) -> list[tuple[str, str]]:
    """What the DataLoader the rules judged does per step and per batch (the reports'
    DataLoader section): the same facts the data-loading rules use."""
    return loader_section(session)[1]


def loader_section(session: Session) -> tuple[str, list[tuple[str, str]]]:
    """The heading of the loader table (its role, :data:`LOADER_ROLE_HEADING`) and its rows.
    An evaluation loader's waits are the evaluation passes' between the steps: its row says
    what evaluation waited in all, not a per-step split of the steps' time."""
    f = _loader_facts(session)
    if f is None:
        return LOADER_ROLE_HEADING["training"], []
    role = _loader_role(f)
    rows = [("Loading is", _bound_words(f, short=False))]
    if role == "evaluation" and f.get("eval_wait_s") is not None:
        rows.append(("Evaluation waited", _eval_wait_words(f)))
    else:
        rows.append(("Per step (mean)", f"wait {_ms(f.get('data_wait_ms'))} + compute {_ms(f.get('compute_ms'))} "
                                        f"= {_ms(f.get('step_mean_ms'))}"))  # fmt: skip
    batch = [f"load {_ms(f.get('load_ms'))}"]
    if f.get("load_cpu_ms") is not None:
        batch.append(f"{_ms(f.get('load_cpu_ms'))} of CPU" + (" in the workers" if f.get("num_workers") else ""))
    if f.get("fetch_runq_ms"):
        batch.append(f"{_ms(f.get('fetch_runq_ms'))} queued for a core")
    batch.append(f"{'use' if role == 'evaluation' else 'train'} {_ms(f.get('train_ms'))}")
    rows.append(("Per batch", ", ".join(batch)))
    if f.get("machine_busy_share") is not None:
        rows.append(("Machine CPUs busy", fmt_pct(f["machine_busy_share"])))
    cores = f.get("cores_for_workers")
    if cores:
        rows.append(("Cores", _cores_words(f, cores)))
    if f.get("suggested_num_workers") is not None:
        helps = "more workers help" if f.get("num_workers_helps") else "more workers would not help"
        rows.append(("Suggested num_workers", f"{f['suggested_num_workers']} (now {f.get('num_workers')}; {helps})"))
    return LOADER_ROLE_HEADING[role], rows


def _cores_words(f: Mapping[str, Any], cores: Any) -> str:
    """The cores row: how many were free beside the training and what other programs used
    during the run; where their use was not measured, the cores less the training's, said as
    such ("2, 1 free beside the training" was shown while other programs kept 1.4 busy)."""
    free = f.get("cores_free_for_workers")
    free_words = "none" if free == 0 else str(free)
    others = f.get("cores_others_busy")
    if others is None:
        return f"{cores}, {free_words} free beside the training (other programs' use not measured)"
    return (f"{cores}: the training kept {f.get('training_cores')} busy and other programs about "
            f"{float(others):.1f} during the run, so {free_words} free")


def _ms(v: Any) -> str:
    return "–" if v is None else f"{float(v):.1f} ms"


def ranks_table(session: Session) -> Table | None:
    """Distributed runs: one row per rank, so a straggler stands out at a glance."""
    if not session.ranks or len(session.ranks) < 2:
        return None
    rows = [[str(r["rank"]), str(r["steps"]), fmt_seconds(r["median_s"]), fmt_seconds(r["p90_s"]),
             fmt_seconds(r["data_wait_per_step_s"]), fmt_pct(r["data_wait_share"]), fmt_bytes(r["peak_memory"]),
             r["status"]] for r in rank_rows(session)]
    return Table("Ranks", ["Rank", "Steps", "Median step", "p90 step", "Data wait / step", "Wait share",
                           "Peak memory", "Status"], rows, numeric={0, 1, 2, 3, 4, 5, 6})


def warnings_table(session: Session) -> Table | None:
    if not session.warnings:
        return None
    records = sorted(session.warnings.values(), key=lambda w: (-w.count, w.first_ts))
    rows = []
    for w in records[:MAX_TABLE_ROWS]:
        where = f"{w.filename}:{w.lineno}" if w.lineno is not None else w.filename
        rows.append([w.category, clip(w.message, 400), where, str(w.count)])
    notes = [f"{len(records) - MAX_TABLE_ROWS} more not shown"] if len(records) > MAX_TABLE_ROWS else []
    dropped = session.warnings_dropped.text()
    if dropped:  # past the recording's cap of distinct messages
        notes.append(dropped)
    note = "; ".join(notes)
    return Table("Warnings", ["Category", "Message", "Where", "Count"], rows, note=note, numeric={3})


def humanize(key: str) -> str:
    return key.replace("_", " ").strip().capitalize() or key


def cell_text(value: Any) -> str:
    """A value as short plain text for a table cell (lists joined, floats with two
    decimals, so a column of figures lines up: 0.67, 10.67, 2.27, not 0.6667 / 10.67)."""
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if value != 0 and abs(value) < 0.005:
            return "<0.01" if value > 0 else "> -0.01"
        return f"{value:,.2f}"
    if isinstance(value, (list, tuple)):
        return ", ".join(cell_text(v) for v in value[:20]) + (" …" if len(value) > 20 else "")
    if isinstance(value, dict):
        return ", ".join(f"{k}={cell_text(v)}" for k, v in list(value.items())[:20])
    return clip(str(value), 300)


def clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


# -- crash -------------------------------------------------------------------------
def raised_at(session: Session) -> Frame | None:
    """Where the crash was raised in the user's code: in a DataLoader worker, the line of
    the worker's own traceback (``__getitem__``), else the innermost user frame."""
    from ..diagnosis.analyzers.crash import raised_at as crash_raised_at

    return None if session.crash is None else crash_raised_at(session.crash)


def crash_frames(session: Session, limit: int = 12) -> list[Frame]:
    """The innermost frames of the crash, user frames marked (a traceback, shortened)."""
    if session.crash is None:
        return []
    return session.crash.frames[-limit:]


def footer_text() -> str:
    return f"mpsprof {__version__}"


def warmup_words(steps: Mapping[str, Any]) -> str:
    """"3 warm-up", and the slow steps after it that the steady figures leave out too, said
    apart: the warm-up is counted as the long-warmup finding counts it (an HF Trainer run's
    headline read "4 warm-up" beside "The first 3 steps are warm-up": its fourth was a step
    mpsprof sampled)."""
    words = f"{steps.get('warmup', 0)} warm-up"
    apart = steps.get("warmup_apart") or 0
    if apart:
        sampled = steps.get("warmup_apart_sampled") or 0
        if sampled >= apart:
            words += f", {apart} slowed by mpsprof's op sampling"
        else:
            words += f", {apart} more before the steady ones" + (
                f" ({sampled} slowed by mpsprof's op sampling)" if sampled else "")
    return words
