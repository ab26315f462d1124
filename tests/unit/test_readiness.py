"""MPS readiness from the native_functions.yaml shipped with torch."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from helpers import child_env
from mpsprofiler import resources
from mpsprofiler.doctor import version_tuple
from mpsprofiler.kernels import readiness
from mpsprofiler.kernels.readiness import (
    MpsKernelTable,
    classify_entries,
    find_native_functions_yaml,
    load_overrides,
    normalize_op,
    predict_fallbacks,
)
from ops_driver import private_cache  # noqa: F401
from torch_facts import has_mps_kernel

TORCH = version_tuple(readiness._torch_version()) or (0, 0)
CTC = "mps" if has_mps_kernel("_ctc_loss") else "cpu_fallback"
"""CTC loss has MPS kernels in a torch whose native_functions.yaml dispatches ``_ctc_loss``
to MPS (2.14.1 already does, 2.13 does not); without one a Mac runs it on the CPU. Read from
the installed torch, never assumed from its release number."""

COL2IM = "mps" if has_mps_kernel("col2im") else "cpu_fallback"
NEAREST3D = "portable" if has_mps_kernel("upsample_nearest3d.out") else "cpu_fallback"
"""MPSFallback.mm ran col2im and upsample_nearest3d.vec on the CPU until PR #152282 and PR
#156090 gave them MPS kernels and deleted those lines: a Mac runs them on the GPU in a torch
whose yaml registers those kernels (2.13 does). Read from the installed torch."""


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> MpsKernelTable:
    return MpsKernelTable.load(cache_dir=tmp_path_factory.mktemp("cache"))


def test_yaml_is_found_inside_torch() -> None:
    path = find_native_functions_yaml()
    assert path is not None and path.name == "native_functions.yaml"
    assert "torchgen" in path.parts


@pytest.mark.parametrize(
    ("op", "status"),
    [
        # no MPS kernel in any torch from 2.1 to 2.15: the ops of examples/fallback_ops.py
        ("aten::multilabel_margin_loss_forward", "cpu_fallback"),
        ("aten::multilabel_margin_loss_backward", "cpu_fallback"),
        ("aten::_pdist_forward", "cpu_fallback"),
        ("aten::_pdist_backward", "cpu_fallback"),
        ("aten::adaptive_max_pool3d", "cpu_fallback"),  # via structured_delegate to .out
        ("aten::adaptive_max_pool3d_backward", "cpu_fallback"),
        ("aten::multilabel_margin_loss_forward.output", "cpu_fallback"),  # the out= variant shares its fate
        # CTC loss: on the CPU unless this torch has its MPS kernels
        ("aten::_ctc_loss", CTC),
        ("aten::_ctc_loss.Tensor", CTC),
        ("aten::_ctc_loss_backward.Tensor", CTC),
        ("aten::_ctc_loss.out", CTC),  # autogen'd out= variant shares its fate
        # MPS kernels, directly or through structured_delegate
        ("aten::add.Tensor", "mps"),
        ("aten::mm", "mps"),
        ("aten::addmm", "mps"),
        ("aten::relu", "mps"),
        ("aten::threshold_backward", "mps"),
        ("aten::_local_scalar_dense", "mps"),
        # composite: runs wherever its pieces run
        ("aten::sum", "portable"),
        ("aten::convolution", "portable"),
        ("aten::t", "portable"),
        ("aten::matmul", "portable"),
        # overrides (rules/data/mps_ops_overrides.yaml)
        ("aten::linalg_svd", "cpu_fallback"),
        ("aten::col2im", COL2IM),
        ("aten::upsample_nearest3d.vec", NEAREST3D),
        ("aten::embedding_renorm_", "cpu_fallback"),
        ("aten::native_group_norm_backward", "mps"),
        # not in the file
        ("aten::no_such_op", "unknown"),
        ("myns::custom", "unknown"),
    ],
)
def test_status(table: MpsKernelTable, op: str, status: str) -> None:
    assert table.status(op) == status


def test_name_forms(table: MpsKernelTable) -> None:
    assert normalize_op("aten::add.Tensor") == "add.Tensor"
    assert normalize_op("aten.add.Tensor") == "add.Tensor"
    assert normalize_op("aten.sum.default") == "sum"
    assert normalize_op("prims::add") == "prims::add"
    assert table.status("aten.mm.default") == table.status("mm") == "mps"
    # an overload-less name that exists only with overloads
    assert table.status("aten::ctc_loss") == "portable"
    assert table.status("aten::_ctc_loss_backward") == CTC


def test_predict_fallbacks(table: MpsKernelTable) -> None:
    got = predict_fallbacks(["aten::_pdist_forward", "aten::mm", "aten::nope"], table)
    assert got == {"aten::_pdist_forward": "cpu_fallback", "aten::mm": "mps", "aten::nope": "unknown"}


def test_classify_synthetic_entries() -> None:
    entries = [
        {"func": "a(Tensor self) -> Tensor", "structured_delegate": "a.out",
         "dispatch": {"SparseCPU, SparseCUDA": "a_sparse"}},
        {"func": "a.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)", "dispatch": {"CPU, CUDA, MPS": "a_out"}},
        {"func": "b(Tensor self) -> Tensor", "dispatch": {"CPU": "b_cpu", "CUDA": "b_cuda"}, "autogen": "b.out"},
        {"func": "c(Tensor self) -> Tensor"},
        {"func": "d(Tensor self) -> Tensor", "dispatch": {"CompositeExplicitAutograd": "d"}},
        {"func": "e(Tensor self) -> Tensor", "structured_delegate": "missing.out"},
        "not a mapping",
    ]  # fmt: skip
    got = classify_entries(entries)  # type: ignore[arg-type]
    assert got == {"a": "mps", "a.out": "mps", "b": "cpu_fallback", "b.out": "cpu_fallback",
                   "c": "portable", "d": "portable", "e": "unknown"}  # fmt: skip


def test_cache_roundtrip_and_speed(tmp_path: Path) -> None:
    start = time.perf_counter()
    first = MpsKernelTable.load(cache_dir=tmp_path)
    parse_s = time.perf_counter() - start
    assert first.source == "yaml" and len(first) > 2000
    start = time.perf_counter()
    second = MpsKernelTable.load(cache_dir=tmp_path)
    cached_s = time.perf_counter() - start
    assert second.source == "cache"
    assert second._ops == first._ops
    assert cached_s < max(0.25, parse_s)
    # a corrupt cache is ignored and rewritten
    (cache_file,) = tmp_path.glob("mps_kernels-*.json")
    cache_file.write_text("{not json")
    third = MpsKernelTable.load(cache_dir=tmp_path)
    assert third.source == "yaml" and third._ops == first._ops
    assert json.loads(cache_file.read_text())["format"] == readiness.CACHE_FORMAT
    # valid JSON of the wrong shape (a list) too: load() never raises
    cache_file.write_text("[1, 2]")
    fourth = MpsKernelTable.load(cache_dir=tmp_path)
    assert fourth.source == "yaml" and fourth._ops == first._ops


def test_unwritable_cache_dir_still_loads(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    table = MpsKernelTable.load(cache_dir=blocker / "sub")
    assert table.status("aten::_pdist_forward") == "cpu_fallback"


def test_without_yaml_everything_is_unknown_even_the_overrides(tmp_path: Path) -> None:
    """Without the yaml no release is known, so no MPSFallback.mm line is known to hold."""
    table = MpsKernelTable.load(yaml_path=tmp_path / "missing.yaml", use_cache=False)
    assert len(table) == 0
    assert table.status("aten::mm") == "unknown"
    assert table.status("aten::col2im") == "unknown"
    assert table.status("aten::embedding_renorm_") == "unknown"


def test_a_fallback_line_holds_until_the_op_gets_an_mps_kernel(tmp_path: Path) -> None:
    """A cpu_always entry is void once the installed yaml registers an MPS kernel for the op
    (or for its ``until_mps_kernel``): torch deletes the MPSFallback.mm line in that release."""
    over = tmp_path / "over.yaml"
    over.write_text("cpu_always:\n  - col2im\n  - {op: upsample_nearest3d.vec, until_mps_kernel: upsample_nearest3d.out}\n"
                    "  - embedding_renorm_\n")
    old = load_overrides(over, own_mps=lambda op: False)
    assert old == {"col2im": "cpu_fallback", "upsample_nearest3d.vec": "cpu_fallback", "embedding_renorm_": "cpu_fallback"}
    new = load_overrides(over, own_mps=lambda op: op in {"col2im", "upsample_nearest3d.out"})
    assert new == {"embedding_renorm_": "cpu_fallback"}
    assert load_overrides(over) == {}


def test_overrides_file_in_rules_data() -> None:
    path = readiness.overrides_path()
    assert path is not None and path.parent.name == "data"
    over = load_overrides(path, own_mps=lambda op: False)
    assert {"embedding_renorm_", "linalg_svd", "linalg_svd.U", "col2im", "upsample_nearest3d.vec"} <= {
        op for op, status in over.items() if status == "cpu_fallback"
    }
    assert over["native_group_norm_backward"] == "mps"


def test_overrides_file_is_not_picked_up_as_a_rule_file() -> None:
    from mpsprofiler.diagnosis.rules import builtin_rules_dir, rule_files

    assert resources.rules_dir() == builtin_rules_dir()
    assert all(p.name != readiness.OVERRIDES_NAME for p in rule_files(builtin_rules_dir()))


def test_bad_overrides_are_ignored(tmp_path: Path) -> None:
    bad = tmp_path / "o.yaml"
    bad.write_text("cpu_always: 3\nmps_kernel: [1, '', 'aten::x']\n")
    assert load_overrides(bad) == {"x": "mps"}
    bad.write_text(": : :")
    assert load_overrides(bad) == {}


# --------------------------------------------------------------------------- backend kernels


@pytest.mark.parametrize(
    ("kernel", "status", "row", "mac_runs"),
    [
        ("aten::mkldnn_rnn_layer", "mps", "lstm-onednn", "_lstm_mps"),
        ("aten::mkldnn_rnn_layer_backward", "mps", "lstm-onednn", "lstm_mps_backward"),
        ("aten::_cudnn_rnn", "mps", "rnn-cudnn", "_lstm_mps"),
        ("aten::miopen_rnn_backward", "mps", "rnn-cudnn", "lstm_mps_backward"),
        ("aten::_scaled_dot_product_flash_attention_for_cpu", "portable", "sdpa-cpu", "_scaled_dot_product_attention_math"),
        ("aten::_scaled_dot_product_flash_attention_for_cpu_backward", "portable", "sdpa-cpu", "_scaled_dot_product_attention_math"),
        ("aten::_scaled_dot_product_cudnn_attention", "portable", "sdpa-cuda", "_scaled_dot_product_attention_math"),
        ("aten::_scaled_dot_product_cudnn_attention_backward", "portable", "sdpa-cuda", "_scaled_dot_product_attention_math"),
        ("aten::_scaled_dot_product_flash_attention", "portable", "sdpa-cuda", "_scaled_dot_product_attention_math"),
        ("aten::_scaled_dot_product_efficient_attention_backward", "portable", "sdpa-cuda", "_scaled_dot_product_attention_math"),
        ("aten::_flash_attention_forward", "portable", "sdpa-cuda", "_scaled_dot_product_attention_math"),
        ("aten::_native_multi_head_attention", "portable", "mha-fastpath", "scaled_dot_product_attention"),
        ("aten::cudnn_convolution", "mps", "conv-cudnn", "_mps_convolution"),
        ("aten::cudnn_batch_norm", "mps", "batchnorm-cudnn", "native_batch_norm"),
        ("aten::_fused_dropout", "mps", "dropout-cuda", "native_dropout"),
        ("aten::_fused_adagrad_", "portable", "fused-adagrad", "_foreach_addcdiv_"),
        # a Mac runs the native CTC loss: on the CPU when this torch has no MPS kernel for it
        # (the true positive survives the mapping), on its GPU when it has one
        ("aten::_cudnn_ctc_loss", CTC, "ctc-cudnn", "_ctc_loss"),
    ],
)
def test_backend_kernels_are_judged_by_what_a_mac_runs(table: MpsKernelTable, kernel: str, status: str,
                                                       row: str, mac_runs: str) -> None:  # fmt: skip
    assert table.own_status(kernel) == "cpu_fallback"  # what the yaml alone would say
    assert table.status(kernel) == status
    evidence = table.explain(kernel)
    assert f"row `{row}`" in evidence and f"a Mac runs `{mac_runs}`" in evidence, evidence


def test_kernels_with_their_own_mps_kernel_need_no_row(table: MpsKernelTable) -> None:
    assert table.status("aten::_fused_adamw_") == "mps"
    assert table.explain("aten::_fused_adamw_") == "native_functions.yaml `_fused_adamw_`: MPS kernel"


def _unlisted_backend_kernels() -> tuple[list[str], object]:
    """Backend-specific kernels of this torch that its yaml alone judges ``cpu_fallback``
    and that the table neither maps nor lists as not implementing a user call."""
    from mpsprofiler.kernels.backends import load_backend_table, looks_backend_specific

    backends = load_backend_table()
    known = {k for row in backends.rows for k in row.kernels} | backends.not_calls
    statuses = classify_entries(readiness._parse_yaml(find_native_functions_yaml()))  # type: ignore[arg-type]
    found = {name.split(".")[0] for name, status in statuses.items()
             if looks_backend_specific(name) and status == "cpu_fallback"}  # fmt: skip
    return sorted(found - known), backends


def test_every_backend_specific_op_of_this_torch_is_in_the_table() -> None:
    """A new cuDNN / oneDNN / flash kernel in a torch release must be looked at: either a
    row maps it to what a Mac runs, or it is listed as not implementing a user call. Up to
    the release the table says it was reviewed through; a newer torch's new kernels are
    reported unknown until then (next test)."""
    missing, backends = _unlisted_backend_kernels()
    for row in backends.rows:  # type: ignore[attr-defined]
        assert row.source.startswith("https://github.com/pytorch/pytorch/"), row.row
    reviewed = backends.reviewed_through  # type: ignore[attr-defined]
    assert reviewed, "mps_backend_kernels.yaml: reviewed_through is missing"
    if TORCH > (version_tuple(reviewed) or (0, 0)):
        pytest.skip(f"torch {readiness._torch_version()} is newer than the table's review ({reviewed})")
    assert not missing, f"add these to rules/data/mps_backend_kernels.yaml: {missing}"


def test_a_backend_kernel_without_a_row_is_no_fallback_prediction(table: MpsKernelTable) -> None:
    """A kernel a newer torch adds (cuDNN attention's in-place variant came in 2.15) has
    no MPS entry of its own; judged by it, every CUDA transformer would be told it falls
    back on a Mac. Without a row it is unknown, and the evidence says why."""
    from mpsprofiler.kernels.backends import BackendTable

    bare = MpsKernelTable({"_cudnn_attention_forward_new": "cpu_fallback", "_pdist_forward": "cpu_fallback"}, {},
                          backends=BackendTable((), frozenset()))  # fmt: skip
    assert bare.status("aten::_cudnn_attention_forward_new") == "unknown"
    assert "does not map yet" in bare.explain("aten::_cudnn_attention_forward_new")
    assert bare.status("aten::_pdist_forward") == "cpu_fallback"  # an ordinary op keeps its prediction
    listed = BackendTable((), frozenset({"_cudnn_attention_forward_new"}))
    assert MpsKernelTable({"_cudnn_attention_forward_new": "cpu_fallback"}, {},
                          backends=listed).status("aten::_cudnn_attention_forward_new") == "cpu_fallback"  # fmt: skip
    missing, _ = _unlisted_backend_kernels()
    assert all(table.status(f"aten::{name}") == "unknown" for name in missing), missing


def test_mapping_needs_the_mac_op_in_this_torch(tmp_path: Path) -> None:
    """A torch without the op a row points to keeps judging the kernel by its own entry."""
    from mpsprofiler.kernels.backends import BackendRow, BackendTable

    rows = BackendTable((BackendRow("r", "test", ("k",), "call", ("missing_op",)),), frozenset())
    table = MpsKernelTable({"k": "cpu_fallback", "m": "mps"}, {}, backends=rows)
    assert table.status("aten::k") == "cpu_fallback"
    rows = BackendTable((BackendRow("r", "test", ("k",), "call", ("missing_op", "m")),), frozenset())
    assert MpsKernelTable({"k": "cpu_fallback", "m": "mps"}, {}, backends=rows).status("aten::k") == "mps"


def test_the_torch_version_is_read_without_importing_torch_or_the_package_metadata() -> None:
    """The table's cache key and its notes name the installed torch as torch itself does
    (``torch.__version__``, the same whether torch is loaded or not), read from
    ``torch/version.py``: a report's process imports neither torch nor ``importlib.metadata``
    for it. (PyPI's CUDA wheel says ``2.14.1+cu130`` there and ``2.14.1`` in its metadata.)"""
    import subprocess
    import sys

    import torch

    code = ("import sys; from mpsprofiler.kernels import readiness; print(readiness._torch_version()); "
            "print(sorted(m for m in ('torch', 'importlib.metadata') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=child_env(),
                         check=True).stdout.split("\n")
    assert out[:2] == [torch.__version__, "[]"]
