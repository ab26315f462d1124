"""The model of torch's MPS checks (devices/mps_rules.py), and every MPS setting the product
suggests run through it: no fix text, ``try`` candidate or ``--set`` may be one torch refuses."""

from __future__ import annotations

import pytest

from mpsprofiler.devices import mps_rules as m
from mpsprofiler.doctor import version_tuple


@pytest.mark.parametrize(("high", "low", "unified", "error"), [
    (None, None, True, None),                      # torch's defaults: 1.7 / 1.4
    (None, None, False, None),                     # 1.7 / 1.0
    (1.0, None, True, "invalid low watermark ratio 1.4"),   # the crash
    (1.0, None, False, None),                      # discrete default low 1.0 <= 1.0
    (1.2, None, False, None),
    (0.9, None, False, "invalid low watermark ratio 1"),
    (1.0, 0.8, True, None),
    (0.0, None, True, None),                       # 0 = no limit: low may go up to 2.0
    (0.0, 2.0, True, None),
    (0.0, 2.1, True, "invalid low watermark ratio 2.1"),
    (2.5, 0.8, True, "invalid high watermark ratio 2.5"),
    (-1.0, None, True, "invalid high watermark ratio -1"),
    (1.0, -0.1, True, "invalid low watermark ratio -0.1"),
])
def test_validate_watermarks_mirrors_init_allocator(high: float | None, low: float | None,
                                                    unified: bool, error: str | None) -> None:
    assert m.validate_watermarks(high, low, unified) == error


def test_env_is_read_like_strtod() -> None:
    assert m.validate_env({m.HIGH: "1.0"}) == "invalid low watermark ratio 1.4"
    assert m.validate_env({m.HIGH: "abc"}) is None            # strtod: 0.0, no limit
    assert m.validate_env({m.HIGH: "1.5x", m.LOW: "1.6"}) == "invalid low watermark ratio 1.6"
    assert m.strtod("1.5x") == 1.5 and m.strtod("lots") == 0.0


def test_effective_limit_is_high_times_recommended() -> None:
    gib = 1024**3
    assert m.effective_limit(None, 16 * gib) == int(1.7 * 16 * gib)
    assert m.effective_limit(1.0, 16 * gib) == 16 * gib
    assert m.effective_limit(0.0, 16 * gib) is None


@pytest.mark.parametrize("high", [0.5, 0.7, 1.0, 1.3, 1.4, 1.7, 2.0])
def test_every_suggested_pair_is_valid_on_both_memory_kinds(high: float) -> None:
    pair = m.watermark_pair(high)
    assert set(pair) == {m.HIGH, m.LOW}
    assert m.validate_env(pair, unified=True) is None and m.validate_env(pair, unified=False) is None
    assert float(pair[m.LOW]) <= float(pair[m.HIGH])


def test_needs_low_only_below_the_default_low() -> None:
    assert m.needs_low(1.0) and m.needs_low(1.39)
    assert not m.needs_low(1.4) and not m.needs_low(1.7) and not m.needs_low(0.0)


def test_api_table_matches_the_installed_torch() -> None:
    """The release table against what this torch has (the table's claims for the other
    releases come from the sources its entries cite)."""
    import torch

    version = (version_tuple(torch.__version__) or (0, 0))[:2]
    assert m.MIN_TORCH <= version <= m.MAX_CHECKED, version
    for fact in m.API:
        obj: object = torch
        for part in fact.name.split(".")[1:]:
            obj = getattr(obj, part, None)
        assert (obj is not None) == m.holds(fact, version), fact.name


def test_pin_memory_behaviour_matches_the_installed_dataloader() -> None:
    import inspect

    import torch.utils.data.dataloader as dl

    version = (version_tuple(__import__("torch").__version__) or (0, 0))[:2]
    warns = "not supported on MPS now" in inspect.getsource(dl)
    fact = next(f for f in m.BEHAVIOUR if f.name == "pin_memory disabled with a warning")
    assert warns == m.holds(fact, version)


# --- every suggestion the product ships, through the model ---------------------------------

from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

from helpers import mpsprof_cli, read_summary  # noqa: E402
from mpsprofiler.devices.fake import FakeMpsBackend  # noqa: E402
from mpsprofiler.diagnosis.analyzers.environment import _watermark  # noqa: E402
from mpsprofiler.diagnosis.engine import with_phrases  # noqa: E402
from mpsprofiler.diagnosis.rules import builtin_rules_dir, load_rules, rule_files  # noqa: E402
from mpsprofiler.experiment.candidates import FIXES  # noqa: E402
from mpsprofiler.report.changes import change_lines  # noqa: E402
from mpsprofiler.settings import AUTO_LOW_NOTE, SettingError, parse_settings  # noqa: E402

ENVS = [{}, {m.HIGH: "1.7"}, {m.HIGH: "0.0"}, {m.HIGH: "1.2", m.LOW: "1.0"}, {m.HIGH: "0.9", m.LOW: "0.7"},
        {m.HIGH: "2.0"}]
"""The watermark settings a run may have had: the facts each fix text is rendered with."""


class _Facts(dict[str, Any]):
    """A run's facts: the watermark ones real, any other a plain number."""

    def __missing__(self, key: str) -> Any:
        return 1.0


def _facts(pyenv: dict[str, str]) -> _Facts:
    return _Facts(_watermark(pyenv), device_label="MPS", crash_kind="oom_mps")


def _refused(env: dict[str, str]) -> list[str]:
    return [f"{kind}: {err}" for kind, unified in (("unified", True), ("discrete", False))
            if (err := m.validate_env(env, unified)) is not None]


@pytest.mark.parametrize("pyenv", ENVS)
def test_no_shipped_fix_text_suggests_a_pair_torch_refuses(pyenv: dict[str, str]) -> None:
    """Today's cache-growth and memory-pressure texts said HIGH=1.0 alone: refused on unified memory."""
    rules = load_rules(rule_files(builtin_rules_dir())).rules
    checked = 0
    for rule in rules:
        for part in (rule.fix_template, rule.evidence_template):
            text = part.render(_Facts(with_phrases(rule, _facts(pyenv))))
            for env in m.assignments(text):
                if env.get(m.HIGH) in ("0.0", "0"):   # named as what never to do; torch accepts it
                    continue
                checked += 1
                assert not _refused(env), (rule.id, env, _refused(env))
                assert m.LOW in env and m.HIGH in env, (rule.id, "a suggested cap names both ratios", env)
    assert checked >= 2   # cache-growth and memory-pressure suggest a cap


@pytest.mark.parametrize("pyenv", ENVS)
def test_no_try_candidate_is_refused(pyenv: dict[str, str]) -> None:
    for rule, make in FIXES.items():
        settings = make(dict(_facts(pyenv))) or {}
        env = {k: v for k, v in (settings.get("env") or {}).items() if k.startswith("PYTORCH_MPS_")}
        assert not _refused(env), (rule, env)
    pair = FIXES["cache-growth"](dict(_facts({})))
    assert pair == {"env": {m.HIGH: "1", m.LOW: "0.8"}}


def test_set_checks_the_pair_with_the_shells_ratios() -> None:
    """The launcher puts --set's variables over the shell's (launcher/child.py), and torch
    checks the pair the run gets (setLowWatermarkRatio, MPSAllocator.mm): a shell's low
    ratio above the high one asked for gets a low one added; a low one asked for above
    the shell's high one is refused here, not at the run's first MPS allocation."""
    assert parse_settings([f"env.{m.HIGH}=1.5"], environ={m.LOW: "1.6"})["env"] == {m.HIGH: "1.5", m.LOW: "1.2"}
    assert parse_settings([f"env.{m.HIGH}=1.5"], environ={m.LOW: "1.0"})["env"] == {m.HIGH: "1.5"}
    assert parse_settings([f"env.{m.HIGH}=1.0"], environ={m.LOW: "0.5"})["env"] == {m.HIGH: "1.0"}
    with pytest.raises(SettingError, match=r"HIGH_WATERMARK_RATIO=1.0 \(from your shell\).*invalid low watermark ratio 1.2"):
        parse_settings([f"env.{m.LOW}=1.2"], environ={m.HIGH: "1.0", m.LOW: "0.8"})
    assert parse_settings([f"env.{m.LOW}=1.2"], environ={})["env"] == {m.LOW: "1.2"}  # under the default 1.7


def test_ratio_text_is_read_as_cs_strtod_reads_it() -> None:
    """init_allocator reads the ratios with C's strtod: Python's float() reads "0_1" as 1.0,
    strtod as 0 (no limit at all). --set takes plain decimal numbers only."""
    assert m.strtod("0_1") == 0.0 and m.strtod("1_5") == 1.0
    assert m.strtod(" 1.5") == 1.5 and m.strtod("1e") == 1.0 and m.strtod("2e-1x") == 0.2
    assert m.strtod("0x1.8p0") == 1.5 and m.strtod("-inf") == float("-inf")
    assert m.validate_env({m.HIGH: "0_1"}) is None  # 0.0: no limit, accepted
    for text in ("0_1", "1.5x", "inf", "0x1p0", ""):
        with pytest.raises(SettingError, match="expected a number"):
            parse_settings([f"env.{m.HIGH}={text}"], environ={})
    assert parse_settings([f"env.{m.HIGH}= 1.0 "], environ={})["env"] == {m.HIGH: "1.0", m.LOW: "0.8"}


def test_set_takes_ratios_up_to_torchs_upper_bound() -> None:
    """setHighWatermarkRatio accepts 0 <= ratio <= default_high_watermark_upper_bound (2.0)."""
    bound = f"{m.HIGH_WATERMARK_UPPER_BOUND:g}"
    assert parse_settings([f"env.{m.HIGH}={bound}"], environ={})["env"] == {m.HIGH: bound}
    with pytest.raises(SettingError, match=f"between 0 and {bound}"):
        parse_settings([f"env.{m.HIGH}={m.HIGH_WATERMARK_UPPER_BOUND + 0.01}"], environ={})


def test_set_high_alone_gets_its_low_ratio() -> None:
    assert parse_settings([f"env.{m.HIGH}=1.0"])["env"] == {m.HIGH: "1.0", m.LOW: "0.8"}
    assert parse_settings([f"env.{m.HIGH}=1.5"])["env"] == {m.HIGH: "1.5"}     # default low 1.4 fits
    assert parse_settings([f"env.{m.HIGH}=0"])["env"] == {m.HIGH: "0"}
    for items in ([f"env.{m.HIGH}=1.0", f"env.{m.LOW}=1.2"], [f"env.{m.LOW}=1.8"]):
        with pytest.raises(SettingError, match="invalid low watermark ratio"):
            parse_settings(items)


def test_fake_unified_backend_runs_with_the_pair(monkeypatch: pytest.MonkeyPatch) -> None:
    """The pair --set gives is what the MPS backend computes its limit from: 1.0 x recommended."""
    env = parse_settings([f"env.{m.HIGH}=1.0"])["env"]
    assert m.validate_env(env, unified=True) is None
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    figures = FakeMpsBackend([(1, 2)], recommended_max=16 * 1024**3).memory()
    assert figures is not None and figures.limit == 16 * 1024**3


def test_run_with_high_alone_sets_both_and_says_so(tmp_path: Path) -> None:
    script = tmp_path / "show.py"
    script.write_text("import os\nprint('RATIOS', os.environ.get('PYTORCH_MPS_HIGH_WATERMARK_RATIO'),"
                      " os.environ.get('PYTORCH_MPS_LOW_WATERMARK_RATIO'))\n")
    run = tmp_path / "run"
    proc = mpsprof_cli("run", "--headless", "-o", str(run), "--set", f"env.{m.HIGH}=1.0", str(script))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "RATIOS 1.0 0.8" in proc.stdout
    summary = read_summary(run)
    assert summary["changes"]["asked"] == [f"env.{m.HIGH}=1.0", f"env.{m.LOW}=0.8"]
    assert f"environment: {m.LOW}=0.8 ({AUTO_LOW_NOTE})" in change_lines(summary)


def test_pin_memory_evidence_dates_the_warning_it_quotes() -> None:
    """Audit fix: the evidence quoted the 2.7+ DataLoader warning as what every release says."""
    rule = next(r for r in load_rules(rule_files(builtin_rules_dir())).rules if r.id == "pin-memory-mps")
    text = rule.evidence_template.render(_facts({}))
    fact = next(f for f in m.BEHAVIOUR if f.name == "pin_memory disabled with a warning")
    assert fact.since is not None and f"torch {fact.since[0]}.{fact.since[1]}" in text
    assert "not supported on MPS now" in text and "without a word" in text


def test_dtype_and_api_claims_carry_their_release() -> None:
    """Audit fixes: bfloat16 is not MPS-wide (2.3+, macOS 14), recommended_max_memory is 2.5+."""
    rules = {r.id: r for r in load_rules(rule_files(builtin_rules_dir())).rules}
    bf16 = next(f for f in m.BEHAVIOUR if f.name == "bfloat16 needs macOS 14")
    fix = rules["float64-mps-crash"].fix_template.render(_facts({}))
    assert bf16.since is not None and f"torch {bf16.since[0]}.{bf16.since[1]}" in fix and "macOS 14" in fix
    rmm = next(f for f in m.API if f.name == "torch.mps.recommended_max_memory")
    near = rules["near-device-limit"].fix_template.render(_facts({}))
    assert rmm.since is not None and f"torch {rmm.since[0]}.{rmm.since[1]}+" in near


# -- the limit as torch computes it, on the Memory panel ------------------------------------------------


@pytest.mark.parametrize("pyenv, limit_gib, computed, ratios", [
    ({}, 27.2, "high 1.7 x 16.0 GiB recommended max", "high 1.7 (default), low 1.4 (default)"),
    ({m.HIGH: "1.0", m.LOW: "0.8"}, 16.0, "high 1 x 16.0 GiB recommended max", "high 1, low 0.8"),
    ({m.HIGH: "0.0"}, None, "no limit (high ratio 0.0)", "high 0, low 1.4 (default)"),
])
def test_memory_panel_shows_max_allowed_as_torch_computes_it(pyenv: dict[str, str], limit_gib: float | None,
                                                             computed: str, ratios: str) -> None:
    """setHighWatermarkRatio: max allowed = high x recommendedMaxWorkingSetSize (0.0: none);
    the panel names it as torch's OOM message does and shows both ratios in force."""
    from rich.console import Console

    from mpsprofiler.devices.mps import high_watermark_ratio
    from mpsprofiler.tui.state import RunState
    from mpsprofiler.tui.widgets.memory import limits_table
    from tests.unit.test_analyzers import GIB, LINUX_ENV, build_session, mem_event

    recommended = 16 * GIB
    ratio = high_watermark_ratio(pyenv)
    limit = m.effective_limit(ratio if ratio is not None else 0.0, recommended)
    assert (limit is None) == (limit_gib is None)
    device = {"allocated": GIB, "cached": 2 * GIB, "total": recommended, "limit": limit}
    env = {**LINUX_ENV, "pytorch_env": pyenv}
    session = build_session(env=env, device="mps", mem=[mem_event(1.0, GIB, device=device)])
    console = Console(width=120, record=True)
    console.print(limits_table(RunState(session, live=False)))
    text = console.export_text()
    assert "computed as" in text and computed in text, text
    assert ratios in text, text
    if limit_gib is not None:
        assert "max allowed" in text and f"{limit_gib:.1f} GiB" in text, text


# -- every MPS name and claim carries its source, read from the installed torch where it can be --------


def _installed(name: str) -> object | None:
    import torch

    obj: object | None = torch
    for part in name.split(".")[1:]:
        obj = getattr(obj, part, None)
    return obj


def _flat(text: str) -> str:
    return " ".join(text.split())


def test_api_table_says_what_the_installed_torch_documents() -> None:
    """Each API fact's words are the installed torch's own (its docstring, or for Event its
    source): empty_cache releases unoccupied cached memory, current_allocated_memory leaves
    the cache out, driver_allocated_memory counts MPS/MPSGraph's own, the fraction is 0~2."""
    import inspect

    checked = 0
    for fact in m.API:
        obj = _installed(fact.name)
        if obj is None or not fact.doc:
            continue
        text = _flat((inspect.getdoc(obj) or "") + " " + inspect.getsource(obj))  # type: ignore[arg-type]
        assert _flat(fact.doc) in text, (fact.name, fact.doc)
        checked += 1
    assert checked >= 6


def test_set_per_process_memory_fraction_checks_what_the_table_says() -> None:
    """torch/mps/__init__.py checks the type, then 0 <= fraction <= 2, before it reaches the
    allocator (so this runs without MPS): the same bound as setHighWatermarkRatio's."""
    import inspect

    import torch

    fn = torch.mps.set_per_process_memory_fraction
    with pytest.raises(TypeError):
        fn(1)
    for bad in (m.HIGH_WATERMARK_UPPER_BOUND + 0.1, -0.1):
        with pytest.raises(ValueError, match="0~2"):
            fn(bad)
    assert f"fraction > {m.HIGH_WATERMARK_UPPER_BOUND:g}" in inspect.getsource(fn)


def _product_texts() -> dict[str, str]:
    root = Path(__file__).resolve().parents[2]
    files = [*sorted((root / "rules").glob("*.yaml")), root / "README.md",
             *sorted((root / "mpsprofiler").rglob("*.py"))]
    return {str(f.relative_to(root)): f.read_text(encoding="utf-8") for f in files}


def test_every_torch_mps_call_the_product_names_is_in_the_sourced_table() -> None:
    """A ``torch.mps.X`` in a rule, the README or the product's code is a row of API (its
    source, its releases), and the installed torch has the ``torch.backends.mps`` calls named."""
    import re

    import torch

    named: dict[str, set[str]] = {}
    backends: set[str] = set()
    for where, text in _product_texts().items():
        for name in re.findall(r"torch\.mps\.([A-Za-z_]\w*)", text):
            named.setdefault(f"torch.mps.{name}", set()).add(where)
        backends.update(re.findall(r"torch\.backends\.mps\.([A-Za-z_]\w*)", text))
    table = {f.name for f in m.API}
    missing = {name: sorted(wh) for name, wh in named.items() if name not in table}
    assert not missing, missing
    assert backends and all(hasattr(torch.backends.mps, b) for b in backends), backends


SOURCES = {
    r"PYTORCH_MPS_(?:HIGH|LOW)_WATERMARK_RATIO": "aten/src/ATen/mps/MPSAllocator.mm",
    r"PYTORCH_ENABLE_MPS_FALLBACK": "aten/src/ATen/mps/MPSFallback.mm",
    r"float64": "aten/src/ATen/mps/EmptyTensor.cpp",
}
"""What a rule that states an MPS setting or claim must cite among its references: the torch
file whose code decides it (a rule's references are what the user sees with the finding)."""


def test_rules_that_state_an_mps_setting_cite_the_torch_file_that_decides_it() -> None:
    """The shipped watermark fix once set the high ratio alone: each rule that names an MPS
    variable (or float64 on MPS) now links the torch source that reads it, and the env docs."""
    import re

    import yaml

    root = Path(__file__).resolve().parents[2]
    checked = 0
    for path in sorted((root / "rules").glob("*.yaml")):
        for rule in (yaml.safe_load(path.read_text(encoding="utf-8")) or {}).get("rules") or []:
            if "mps" not in (rule.get("devices") or ["mps"]):
                continue
            refs = " ".join(r if isinstance(r, str) else r.get("ref", "") for r in rule.get("references") or [])
            text = yaml.safe_dump({k: v for k, v in rule.items() if k != "references"})
            mps = "MPS" in text or "mps" in text
            for pattern, source in SOURCES.items():
                if mps and re.search(pattern, text):
                    checked += 1
                    assert source in refs, (path.name, rule["id"], pattern, source)
                    if "PYTORCH_" in pattern:
                        assert "mps_environment_variables" in refs, (path.name, rule["id"])
    assert checked >= 10


def test_exactly_one_minimum_macos_holds_for_every_supported_torch() -> None:
    """The three 'MPS needs macOS' facts (MPSDevice::MPSDevice's MPSGraph check) cover every
    release from MIN_TORCH to MAX_CHECKED once, and rise with the release."""
    from mpsprofiler.environment import mps_min_macos_for

    facts = [f for f in m.BEHAVIOUR if f.name.startswith("MPS needs macOS")]
    assert [f.name for f in facts] == [f"MPS needs macOS {a}.{b}" for a, b in m.MIN_MACOS]
    previous = (0, 0)
    for minor in range(m.MIN_TORCH[1], m.MAX_CHECKED[1] + 1):
        version = (2, minor)
        holding = [f for f in facts if m.holds(f, version)]
        assert len(holding) == 1, (version, [f.name for f in holding])
        assert "MPSDevice.mm MPSDevice::MPSDevice" in holding[0].source
        need = mps_min_macos_for(version)
        assert need == m.min_macos(version) >= previous
        previous = need


def test_every_behaviour_and_api_fact_names_a_public_source() -> None:
    for fact in (*m.API, *m.BEHAVIOUR):
        assert fact.source.startswith(("aten/", "torch/", "pytorch/pytorch#")), fact
        assert fact.since is None or fact.since >= m.MIN_TORCH, fact
        assert fact.until is None or fact.until <= m.MAX_CHECKED, fact


def test_macos_starts_workers_by_spawn_as_the_installed_python_says() -> None:
    """"spawn (the default on macOS)" (spawn-bootstrap-crash, worker-respawn, the analyzers):
    CPython's multiprocessing/context.py picks spawn where sys.platform is darwin (bpo-33725,
    Python 3.8), read from this Python's own source; the analyzers price a Mac's workers so."""
    import inspect
    import multiprocessing.context as context
    import re

    from mpsprofiler.diagnosis.analyzers.common import start_method
    from tests.unit.test_analyzers import MAC_ENV, build_session, loader

    src = inspect.getsource(context)
    assert re.search(r"if sys\.platform == 'darwin':\n(?:\s*#.*\n)*\s*_default_context = "
                     r"DefaultContext\(_concrete_contexts\['spawn'\]\)", src), "macOS default changed"
    workers = loader(num_workers=2)
    assert start_method(build_session(env=MAC_ENV, loaders=[workers]), workers) == "spawn"


def test_every_script_that_sets_the_high_ratio_sets_a_low_one_torch_accepts(monkeypatch: pytest.MonkeyPatch) -> None:
    """Audit fix: examples/triggers/near_device_limit.py set PYTORCH_MPS_HIGH_WATERMARK_RATIO=1.0
    alone before `import torch`, which a Mac refuses at the first MPS tensor (default low 1.4).
    Each shipped script that sets the variable is run up to its `import torch` here, in an
    environment without either ratio, and the pair it leaves must pass torch's checks."""
    import re

    root = Path(__file__).resolve().parents[2]
    checked = 0
    for path in sorted(p for d in ("examples", "scripts", "benchmarks", "mpsprofiler") for p in (root / d).rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        if not re.search(r"environ(?:\.setdefault\(|\[)\s*[\"']" + m.HIGH, text):
            continue
        prelude = text[:text.index("\nimport torch")] if "\nimport torch" in text else text
        for name in (m.HIGH, m.LOW):  # set first, so that monkeypatch restores what the prelude sets
            monkeypatch.setenv(name, "")  # (delenv of an absent name records nothing to undo: the
            monkeypatch.delenv(name)  # ratios leaked into later tests of the worker, device_limit x1.0)
        exec(compile(prelude, str(path), "exec"), {"__name__": "prelude"})  # noqa: S102
        import os

        env = {k: os.environ[k] for k in (m.HIGH, m.LOW) if k in os.environ}
        assert m.HIGH in env and m.LOW in env, (path, env)
        assert not _refused(env), (path, env, _refused(env))
        checked += 1
    assert checked >= 1
