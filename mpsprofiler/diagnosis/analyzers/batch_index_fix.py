"""The script's DataLoader line rewritten to index whole batches, in the loader's own order.

``dataloader-batch-indexing`` tells a loader that builds each batch one sample at a time
from memory to hand the dataset a list of indices instead: a ``BatchSampler`` as the
loader's ``sampler`` and ``batch_size=None`` (torch's docs, "Disable automatic batching").
A template with ``RandomSampler(dataset)`` was wrong for an evaluation loader that does not
shuffle: it shuffled the evaluation (a script comparing predictions with labels in order
got a meaningless accuracy), and its draws from the global RNG changed the training's
shuffle after it. So the sampler inside is the loader's own: ``SequentialSampler`` where it
does not shuffle, ``RandomSampler`` where it does (drawn as the loader's own would be,
``generator`` included: the same batches in the same order), the script's ``sampler=``
where it has one; its names, ``batch_size``, ``drop_last`` and other arguments as written.

The line may be an assignment (``loader = DataLoader(...)``) or a helper's ``return
DataLoader(...)`` (pytorch/examples-style ``make_loader(n, batch_size, shuffle)``: the
sampler then follows the helper's ``shuffle`` parameter, right for its training and its
evaluation callers alike). A dataset built inside the call (``DataLoader(MyData(n), ...)``)
is built once, into a variable of its own before the line, as the sampler needs it too.

Where the line cannot be read (no source, ``**kwargs``, a ``batch_sampler`` or
``collate_fn`` of its own, which a whole-batch index changes), the snippet keeps generic
names with the sampler the probe recorded (``sampler``).
"""

from __future__ import annotations

import ast
from typing import Any

from ...events.payloads import DataLoaderFields
from .source_edit import find_call, read_tree

BATCH_INDEX_FACTS: tuple[str, ...] = ("batch_index_code", "batch_index_order")
"""``batch_index_code``: the snippet; ``batch_index_order``: ``random``, ``sequential``,
``either`` (a ``shuffle=`` expression) or ``own`` (the script's ``sampler=``), the code ``rules/dataloader-stall.yaml`` words for
the "slice the tensors yourself" line."""

DATALOADER_PARAMS = ("dataset", "batch_size", "shuffle", "sampler", "batch_sampler", "num_workers", "collate_fn",
                     "pin_memory", "drop_last", "timeout", "worker_init_fn", "multiprocessing_context", "generator")
"""``torch.utils.data.DataLoader.__init__``'s positional parameters, in order."""
WORKER_ONLY = ("persistent_workers", "prefetch_factor", "multiprocessing_context", "worker_init_fn", "timeout")
"""Arguments for worker processes only: ``DataLoader.__init__`` refuses the first three with
``num_workers=0`` (``ValueError: persistent_workers option needs num_workers > 0``, and so
for ``prefetch_factor`` and ``multiprocessing_context``), the others then do nothing."""
REFUSED = frozenset({"batch_sampler", "collate_fn"})
"""Arguments a whole-batch index changes the meaning of: no rewrite of that line."""
NO_COLLATE = "  # the sampler yields whole batches: no per-sample collate"


def batch_index_facts(loader: DataLoaderFields, batch_size_arg: str) -> dict[str, Any]:
    """See the module docstring."""
    shuffles = loader.get("sampler") == "RandomSampler"
    file, line = loader.get("file"), loader.get("line")
    rewritten = _rewrite(str(file), int(line)) if file and isinstance(line, int) else None
    if rewritten is not None:
        return {"batch_index_code": rewritten[0], "batch_index_order": rewritten[1]}
    kind = "RandomSampler" if shuffles else "SequentialSampler"
    code = (f"from torch.utils.data import BatchSampler, DataLoader, {kind}\n\n"
            f"batches = BatchSampler({kind}(dataset), batch_size={batch_size_arg}, drop_last=False)\n"
            f"loader = DataLoader(dataset, sampler=batches, batch_size=None)  # no per-sample collate")
    return {"batch_index_code": code, "batch_index_order": "random" if shuffles else "sequential"}


def _rewrite(path: str, line: int) -> tuple[str, str] | None:
    """The assignment at ``path:line`` that builds the loader, rewritten, and its order."""
    read = read_tree(path)
    if read is None:
        return None
    source, tree = read
    found = find_call(tree, line, ("DataLoader",))
    if found is None:
        return None
    stmt, call = found
    assign = isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and stmt.value is call
    if not (assign or (isinstance(stmt, ast.Return) and stmt.value is call)):
        return None
    args: dict[str, str] = {}
    seg = ast.get_source_segment
    if len(call.args) > len(DATALOADER_PARAMS) or any(isinstance(a, ast.Starred) for a in call.args):
        return None
    for name, node in [*zip(DATALOADER_PARAMS[:len(call.args)], call.args, strict=True), *((k.arg, k.value) for k in call.keywords)]:
        text = seg(source, node)
        if name is None or text is None:  # **kwargs: what it sets is unknown here
            return None
        args[name] = text
    dataset, func = args.pop("dataset", None), seg(source, call.func)
    target = seg(source, stmt.targets[0]) if isinstance(stmt, ast.Assign) else None
    if dataset is None or func is None or (assign and target is None) or REFUSED & set(args):
        return None
    if "num_workers" in args:
        # whole batches indexed in the training process, as both reasons of the rule say
        # (worker processes would pickle and copy every batch: "index whole batches in the
        # training process instead (num_workers=0)"); the loader's own workers were kept,
        # and its worker-only arguments with them, which num_workers=0 refuses
        args["num_workers"] = "0"
        for name in WORKER_ONLY:
            args.pop(name, None)
    built: list[str] = []
    if not isinstance(_expr(dataset), (ast.Name, ast.Attribute)):
        # built inside the call: written twice it would be built twice, so built once before
        name = _free_name(tree)
        if name is None:
            return None
        built, dataset = [f"{name} = {dataset}"], name
    shuffle = args.pop("shuffle", "False")
    batch_size = args.pop("batch_size", "1")
    drop_last = args.pop("drop_last", "False")
    generator = args.get("generator")
    random = f"RandomSampler({dataset}" + (f", generator={generator})" if generator else ")")
    sequential = f"SequentialSampler({dataset})"
    own = args.pop("sampler", None)
    flag = _expr(shuffle)
    kinds: tuple[str, ...]
    if own is not None:
        inner, order, kinds = own, "own", ()
    elif isinstance(flag, ast.Constant) and flag.value in (True, False, None):
        inner, order = (random, "random") if flag.value else (sequential, "sequential")
        kinds = ("RandomSampler",) if flag.value else ("SequentialSampler",)
    else:
        inner, order = f"{random} if {shuffle} else {sequential}", "either"
        kinds = ("RandomSampler", "SequentialSampler")
    imports = ", ".join(("BatchSampler", *kinds))
    head = f"{target} = {func}(" if target is not None else f"return {func}("
    lines = [f"from torch.utils.data import {imports}", "", *built, head, f"    {dataset},",
             f"    sampler=BatchSampler({inner}, batch_size={batch_size}, drop_last={drop_last}),",
             f"    batch_size=None,{NO_COLLATE}"]
    lines += [f"    {name}={value}," for name, value in args.items()]
    lines.append(")")
    return "\n".join(lines), order


DATASET_NAMES = ("dataset", "data_set", "batch_dataset")
"""Names for a dataset built inside the loader's call, the first the file does not use."""


def _free_name(tree: ast.Module) -> str | None:
    """A dataset name no variable, argument or attribute of the file has (a clash would
    rebind the script's own)."""
    used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    used |= {n.arg for n in ast.walk(tree) if isinstance(n, ast.arg)}
    return next((name for name in DATASET_NAMES if name not in used), None)


def _expr(text: str) -> ast.expr | None:
    try:
        return ast.parse(text, mode="eval").body
    except SyntaxError:
        return None
