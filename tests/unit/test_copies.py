"""Pageable batches on CUDA (probe/copies.py -> analyzers/copies.py -> pageable-copies):
the check looks only when the model trains on CUDA, only at a loader's first batches,
and the rule names the loader and the ``--set`` that pins it."""

from __future__ import annotations

import torch
from torch.utils.data import DataLoader, TensorDataset

from mpsprofiler import events
from mpsprofiler.diagnosis.facts import collect_facts
from mpsprofiler.probe.copies import CHECKED, PinCheck
from mpsprofiler.settings import parse_settings
from tests.unit.test_analyzers import LINUX_ENV, build_session, loader, step_rows
from tests.unit.test_host_bound import _fired


def _check(kind: str, batches: int, pin_memory: bool = False, owner=None) -> list[dict]:
    sent: list[dict] = []
    pins = PinCheck(lambda k, **f: sent.append(f), lambda: kind)
    data = DataLoader(TensorDataset(torch.zeros(256, 3, 32, 32), torch.zeros(256, dtype=torch.long)), batch_size=8,
                      pin_memory=pin_memory)
    it = iter(data)
    pins.on_iter(it, data if owner is None else owner, 1)
    for _ in range(batches):
        pins.on_batch(it, next(it))
    pins.close()
    return sent


def test_pageable_batches_on_cuda_are_counted_once():
    sent = _check("cuda", CHECKED + 10)
    assert len(sent) == 1
    row = sent[0]
    assert row["loader"] == 1 and row["batches"] == CHECKED and row["pageable_batches"] == CHECKED
    assert row["bytes_per_batch"] == 8 * 3 * 32 * 32 * 4 + 8 * 8 and row["pin_memory"] is False


def test_a_loader_closed_early_reports_its_own_pin_memory_or_none():
    """A loader ended before CHECKED batches (a short validation pass) says what its
    pin_memory really is; a loader-like object without one says nothing of it."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # pin_memory=True without CUDA: torch warns, the setting stays
        early = _check("cuda", 5, pin_memory=True)
    assert len(early) == 1 and early[0]["batches"] == 4 and early[0]["pin_memory"] is True
    assert _check("cuda", 5)[0]["pin_memory"] is False

    class Custom:  # an iterable of batches that is no DataLoader
        pass

    unknown = _check("cuda", 5, owner=Custom())
    assert len(unknown) == 1 and "pin_memory" not in unknown[0]
    session = build_session(env=LINUX_ENV, device="cuda", rows=step_rows([0.02] * 40))
    session.feed(events.decode(events.encode(events.KIND_HEALTH, 2.0, **unknown[0])))
    assert collect_facts(session)["pageable_loader_pin_memory"] is None


def test_nothing_is_looked_at_off_cuda():
    assert _check("mps", CHECKED + 2) == [] and _check("cpu", 4) == []


def test_rule_names_the_loader_and_its_set():
    session = build_session(env=LINUX_ENV, device="cuda", loaders=[loader(id=2)], rows=step_rows([0.02] * 40))
    session.feed(events.decode(events.encode(events.KIND_HEALTH, 2.0, what="copies", loader=2, batches=16,
                                             pageable_batches=16, bytes_per_batch=12 * 1024**2,
                                             pinned_bytes_per_batch=0, pin_memory=False)))
    finding = _fired(session)["pageable-copies"]
    assert finding.title.startswith("DataLoader 2 hands CUDA its batches from pageable memory")
    assert "--set dataloader.2.pin_memory=true" in finding.fix and "non_blocking=True" in finding.fix
    assert "measured the bytes per batch, not the copies' time" in " ".join(finding.evidence.split())
    assert parse_settings(["dataloader.2.pin_memory=true"])  # the --set the fix names is one try accepts
    pinned = build_session(env=LINUX_ENV, device="cuda", loaders=[loader(id=2)], rows=step_rows([0.02] * 40))
    pinned.feed(events.decode(events.encode(events.KIND_HEALTH, 2.0, what="copies", loader=2, batches=16,
                                            pageable_batches=0, bytes_per_batch=12 * 1024**2,
                                            pinned_bytes_per_batch=12 * 1024**2, pin_memory=True)))
    assert "pageable-copies" not in _fired(pinned)


def test_off_cuda_no_loader_stays_open():
    """Once the training's device is known not to be CUDA (the probe's first optimizer
    step), no loader is open: the DataLoader hook's per-batch test stops at the empty set."""
    pins = PinCheck(lambda k, **f: None, lambda: "mps")
    data = DataLoader(TensorDataset(torch.zeros(16, 2)), batch_size=4)
    pins.on_iter(iter(data), data, 1)
    assert pins.open == {1}
    pins.not_on_cuda()
    assert not pins.open
    other = DataLoader(TensorDataset(torch.zeros(16, 2)), batch_size=4)
    pins.on_iter(iter(other), other, 2)  # a loader built later (a validation loader)
    assert not pins.open
