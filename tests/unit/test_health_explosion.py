"""Which gradient norms before a non-finite loss call for clipping (diagnosis/analyzers/health.py)."""

import math

from mpsprofiler.diagnosis.analyzers.health import GRAD_JUMP, _exploded, _f


def test_a_nan_norm_is_the_nan_itself_not_an_explosion() -> None:
    # sent as the word "nan" (JSON has no NaN): read back as a float NaN
    norm = _f("nan")
    assert norm is not None and math.isnan(norm)
    assert not _exploded(norm, math.inf)


def test_an_infinite_or_jumping_norm_is_an_explosion() -> None:
    assert _exploded(_f("inf"), math.inf)
    assert _exploded(50.0, GRAD_JUMP * 2)
    assert not _exploded(1.0, GRAD_JUMP / 2)
    assert not _exploded(None, None)
