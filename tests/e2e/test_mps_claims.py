"""Session 57 audit of the MPS advice: each release-dependent claim a fix makes on a Mac,
checked against the table in ``mpsprofiler/devices/mps_rules.py`` and the installed torch.

* ``torch.autocast(device_type="mps")`` raises ``RuntimeError: User specified an
  unsupported autocast device_type 'mps'`` before torch 2.5 (``autocast.__init__`` in
  torch/amp/autocast_mode.py; MPS autocast came with pytorch/pytorch#99272), so a fix for a
  Mac writes it only for a torch that takes it.
* ``pip install -U torch`` on a Mac below macOS 14 can install a torch that finds no MPS
  device there (``MPSDevice::MPSDevice``, aten/src/ATen/mps/MPSDevice.mm): an upgrade is
  capped at the last release with MPS on that macOS.

The rules run through the real engine and rule files over sessions built from recorded
figures (no Mac here), for every torch release the product supports.
"""

from __future__ import annotations

import importlib
import inspect
import re
import warnings
from typing import Any

import pytest
import torch

from mpsprofiler.devices import mps_rules as m
from mpsprofiler.session.session import Session
from tests.e2e.test_rules_shipped import _crash, _near_limit, fired
from tests.unit.test_analyzers import GIB, MAC_ENV, build_session, loader, mem_event, step_rows

RELEASES = [(2, minor) for minor in range(m.MIN_TORCH[1], m.MAX_CHECKED[1] + 1)]
MPS_AUTOCAST = re.compile(r"autocast\(\s*device_type\s*=\s*[\"']mps[\"']")
INSTALLED = tuple(int(p) for p in re.findall(r"\d+", torch.__version__)[:2])


def _mac_sessions(version: tuple[int, int]) -> dict[str, Session]:
    """The Mac findings whose fixes may write autocast, on a Mac with torch ``version``."""
    torch_v, macos = f"{version[0]}.{version[1]}.0", m.min_macos(version)
    env = dict(MAC_ENV, torch=torch_v, macos_version=f"{macos[0]}.{macos[1]}")
    return {
        "oom-crash-mps": _crash("oom_mps", env)(),
        "near-device-limit": _near_limit(env),
        # the bfloat16 crash needs a macOS before 14 (torch 2.3-2.8 only: 2.9 has no MPS there)
        "bf16-macos-crash": _crash("bf16_macos", dict(env, macos_version="13.6"))(),
    }


def test_the_autocast_table_says_what_the_installed_torch_does() -> None:
    """The table's release for MPS autocast, checked where the installed torch falls: from
    2.5 ``torch.autocast`` is available for "mps" and constructs without a warning for
    float16 (and, from 2.6, for bfloat16); before, its source refuses the device."""
    import torch.amp.autocast_mode as autocast_mode

    if not m.holds(m.behaviour("float16 autocast on MPS"), INSTALLED):
        assert "unsupported autocast device_type" in inspect.getsource(autocast_mode)
        return
    assert autocast_mode.is_autocast_available("mps")
    dtypes = [torch.float16] + ([torch.bfloat16] if m.mps_autocast(INSTALLED) == "fp16_bf16" else [])
    for dtype in dtypes:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            torch.autocast(device_type="mps", dtype=dtype)  # constructing only: no MPS needed


def test_mps_autocast_and_the_release_that_brought_it() -> None:
    assert [m.mps_autocast(v) for v in ((2, 1), (2, 4), (2, 5), (2, 6))] == ["none", "none", "fp16", "fp16_bf16"]
    assert m.behaviour("float16 autocast on MPS").since == (2, 5)
    assert "99272" in m.behaviour("float16 autocast on MPS").source


@pytest.mark.parametrize("version", RELEASES, ids=lambda v: f"torch{v[0]}.{v[1]}")
def test_no_mac_fix_writes_mps_autocast_for_a_torch_that_refuses_it(version: tuple[int, int]) -> None:
    """oom-crash-mps, near-device-limit and bf16-macos-crash wrote
    ``torch.autocast(device_type="mps", ...)`` to every Mac: on torch 2.1-2.4 that line raises
    RuntimeError. Now it is written exactly where the table says the release takes it."""
    takes = m.mps_autocast(version) != "none"
    for rule, session in _mac_sessions(version).items():
        found = fired(session)
        if rule == "bf16-macos-crash" and not (2, 3) <= version <= (2, 8):
            continue  # that error exists in torch 2.3-2.8 only
        assert rule in found, (rule, sorted(found))
        fix = found[rule].fix
        code = "".join(re.findall(r"```python\n(.*?)```", fix, re.S))
        assert bool(MPS_AUTOCAST.search(code)) == takes, (rule, version, fix)
        assert "```python" in fix and "{" not in fix.replace("{{", "")
        if not takes and rule != "near-device-limit":
            assert f"torch {version[0]}.{version[1]}.0 has no autocast on MPS" in fix, fix


def test_a_cuda_run_keeps_its_float16_autocast() -> None:
    """The gate is for MPS only: CUDA has float16 autocast in every supported release."""
    env = dict(MAC_ENV, platform="linux", apple_silicon=False, torch="2.1.2", cuda_available=True)
    rows = step_rows([0.1] * 20, alloc=[int(15.5 * GIB)] * 20)
    dev = {"allocated": int(15.5 * GIB), "cached": int(16.5 * GIB), "peak": int(16.5 * GIB),
           "total": 17 * GIB, "limit": 17 * GIB}
    session = build_session(env=env, device="cuda", rows=rows, loaders=[loader(batch_size=64)],
                            mem=[mem_event(r[1], 2 * GIB, device=dev) for r in rows])
    fix = fired(session)["near-device-limit"].fix
    assert 'torch.autocast(device_type="cuda", dtype=torch.float16)' in fix and "loss = loss_fn" in fix


@pytest.mark.parametrize("macos", [(12, 3), (12, 7), (13, 0), (13, 6), (14, 0), (15, 2)])
def test_an_upgrade_keeps_a_release_with_mps_on_this_macos(macos: tuple[int, int]) -> None:
    """Every release the capped command allows finds an MPS device on ``macos``, and the
    newest one the product checked that does is allowed (``MPSDevice::MPSDevice``)."""
    below = m.torch_below_for_macos(macos)
    allowed = [v for v in RELEASES if below is None or v < below]
    assert allowed and all(m.min_macos(v) <= macos for v in allowed)
    with_mps = [v for v in RELEASES if m.min_macos(v) <= macos]
    assert max(with_mps) == max(allowed)
    command = m.upgrade_command(macos)
    assert command.startswith("python -m pip install -U ")
    assert (below is None) == command.endswith(" torch"), command


def test_mac_fixes_that_suggest_an_upgrade_cap_it_below_macos_14() -> None:
    """The fallback finding and mps-unavailable said `pip install -U torch`; on macOS 13
    that can install torch 2.9+, which finds no MPS device before macOS 14."""
    env = dict(MAC_ENV, torch="2.5.1", macos_version="13.6")
    why = fired(build_session(env=dict(env, mps_available=False, mps_built=False)))["mps-unavailable"]
    assert 'python -m pip install -U "torch<2.9"' in why.fix, why.fix
    assert "pip install -U torch`" not in why.fix
    new = fired(build_session(env=dict(MAC_ENV, torch="2.9.0", macos_version="14.5", mps_available=False,
                                        mps_built=False)))["mps-unavailable"]
    assert "python -m pip install -U torch" in new.fix, new.fix


def test_torch_compile_on_mps_is_suggested_from_the_release_that_has_mpsinductor() -> None:
    """host-bound suggested ``torch.compile(model)`` on every Mac; inductor has no MPS code
    generator before torch 2.8 (the first call fails with BackendCompilerFailed: 2.3 "Device
    mps not supported", pytorch/pytorch#125254; 2.6 a LoweringException of the prototype). Where the
    installed torch is 2.8+, its inductor holds the Metal code generator the table cites."""
    import importlib.util

    if m.compiles_for_mps(INSTALLED):
        assert importlib.util.find_spec("torch._inductor.codegen.mps") is not None
    assert [v for v in RELEASES if m.compiles_for_mps(v)][0] == (2, 8)
    assert "157957" in m.behaviour("torch.compile on MPS").source


@pytest.mark.parametrize(("call", "written", "on_cuda"), [
    ("x.cuda(non_blocking=True)", 'x.to(device, non_blocking=device.type == "cuda")', True),
    ("x.cuda(non_blocking=pin)", 'x.to(device, non_blocking=pin and device.type == "cuda")', True),
    ("x.cuda(non_blocking=cfg.pin)", 'x.to(device, non_blocking=cfg.pin and device.type == "cuda")', True),
    ("x.cuda(non_blocking=False)", "x.to(device, non_blocking=False)", False),
    ("x.cuda()", "x.to(device)", False),
])
def test_a_cuda_script_patched_for_a_mac_copies_to_mps_blocking(call: str, written: str, on_cuda: bool) -> None:
    """`patch` makes a CUDA tutorial's ``.cuda(non_blocking=True)`` ``.to(device, ...)`` with
    the device chosen at run time, MPS on a Mac. ``.to("mps", non_blocking=True)`` from
    pageable memory can read the CPU batch after Python freed it (pytorch/pytorch#139550,
    #189690: silent corruption), so non_blocking stays for CUDA only. The written line is
    evaluated with a CUDA-like and an MPS-like device: blocking on MPS, as written on CUDA."""
    from types import SimpleNamespace

    from mpsprofiler.patch.cst import cuda_calls_to

    text, lines = cuda_calls_to(f"import torch\nx = {call}\n", "device")
    assert lines == [2] and f"x = {written}" in text
    seen: list[Any] = []
    tensor = SimpleNamespace(to=lambda dev, non_blocking=False: seen.append((dev.type, non_blocking)))
    for kind in ("cuda", "mps"):
        scope = {"x": tensor, "device": SimpleNamespace(type=kind), "pin": True,
                 "cfg": SimpleNamespace(pin=True)}
        exec(written, scope)  # noqa: S102 (the line the patch writes, over stand-ins)
    assert seen == [("cuda", on_cuda), ("mps", False)]


def test_long_first_step_credits_the_compile_cache_not_cuda_graphs(monkeypatch: pytest.MonkeyPatch) -> None:
    """long-first-step said `mode="reduce-overhead"` and the cache shorten the next runs: the
    mode is CUDA graphs (nothing on MPS, no shorter compiles). The cache it names is on by
    default in the installed torch (``fx_graph_cache`` in torch/_inductor/config.py)."""
    from tests.e2e.test_rules_shipped import SYNTHETIC

    fix = fired(SYNTHETIC["long-first-step"]())["long-first-step"].fix
    assert "reduce-overhead" not in fix and "TORCHINDUCTOR_FX_GRAPH_CACHE=1" in fix
    monkeypatch.delenv("TORCHINDUCTOR_FX_GRAPH_CACHE", raising=False)
    monkeypatch.delenv("TORCHINDUCTOR_FX_GRAPH_CACHE_DEFAULT", raising=False)
    source = inspect.getsource(importlib.import_module("torch._inductor.config"))
    if "fx_graph_cache: bool = Config(" in source:  # the releases that declare it with Config
        block = source[source.index("fx_graph_cache: bool = Config("):]
        assert re.search(r"default\s*=\s*True", block[:block.index(")")]), block[:300]


def test_the_kernel_check_mps_readiness_prints_runs_as_written() -> None:
    """mps-readiness tells the user to run
    ``torch._C._dispatch_has_kernel_for_dispatch_key("<op>", "MPS")`` on the Mac with the op
    name the probe recorded (``OpOverload.name()``). That call refuses "aten::addmm.default"
    ("default is not a legal overload name"); the recorded names never carry ".default", so
    the check runs as printed (False on this CPU build, where MPS has no kernels)."""
    from mpsprofiler.probe.ops_record import op_info

    for overload in (torch.ops.aten.addmm.default, torch.ops.aten.add.Tensor, torch.ops.aten._ctc_loss.default,
                     torch.ops.aten.linalg_svd.default):
        name = op_info(overload)[0]
        assert not name.endswith(".default"), name
        torch._C._dispatch_has_kernel_for_dispatch_key(name, "MPS")  # runs, whatever it answers
    assert torch._C._dispatch_has_kernel_for_dispatch_key(op_info(torch.ops.aten.addmm.default)[0], "CPU")


def test_padding_advice_says_to_mask_the_padding() -> None:
    """cache-growth pads inputs to a few lengths (fewer sizes in the MPS cache); padded
    positions that reach the loss unmasked change the training's result, so the same lines
    say to mask them."""
    from tests.e2e.test_rules_shipped import SYNTHETIC

    fix = fired(SYNTHETIC["cache-growth"]())["cache-growth"].fix
    assert "functional.pad(" in fix and "attention_mask" in fix and "ignore_index" in fix


def test_workers_started_where_there_were_none_warn_of_pickling_under_spawn() -> None:
    """Advice that starts workers (loader_seeded "first") on a Mac, where workers start by
    spawn: an unpicklable Dataset, collate_fn or worker_init_fn (a lambda) stops the first
    batch. The words quoted are the installed DataLoader's own docstring."""
    import torch.utils.data

    from mpsprofiler.diagnosis.engine import phrase_for
    from mpsprofiler.diagnosis.rules import builtin_rules_dir, load_rules

    quoted = "cannot be an unpicklable object, e.g., a lambda function"
    assert quoted in " ".join((torch.utils.data.DataLoader.__doc__ or "").split())
    rules = [r for r in load_rules([builtin_rules_dir() / "dataloader-stall.yaml"]) if "loader_seeded" in r.phrases]
    assert rules
    for rule in rules:
        text = " ".join(phrase_for(rule.phrases, {"loader_seeded": "first"}, "loader_seeded", ()).split())
        assert quoted in text and "module level" in text, text
        assert phrase_for(rule.phrases, {"loader_seeded": "none"}, "loader_seeded", ()) == ""
