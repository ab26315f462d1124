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
