"""What ``mpsprof patch`` says of a finding it writes no patch for: one place for every
such sentence, so they are read and changed as data, not hunted for in the planner.

The line is ``not patched: <rule>: <what> (<why>)``. ``what`` is a list of templates
tried in order: the first whose ``{names}`` are all known wins, so a template that names
the place (``{crash_at}``: the crash's file:line; ``{loader_at}``: the DataLoader the
finding names; ``{script}``) comes before one that cannot. Names are the finding's facts
plus those :mod:`.unplanned` adds: ``crash_at``, ``loader_at``, ``script``, ``command``
(taken from the finding's own fix text by the entry's ``command`` pattern: group 1, else
the whole match). An ``env`` entry is a fix that is no code edit (a variable to set,
another program to close): its line says so and shows the command.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Hand:
    """How to say that one rule's fix is the user's to make, and why."""

    what: tuple[str, ...]
    why: str
    env: bool = False
    command: str | None = None
    """A regular expression over the finding's fix text whose match is ``{command}``."""


LINE = "not patched: {rule}: {what} ({why})"
NOT_CODE = "the fix is not a code edit: {what}"
UNKNOWN = Hand(("edit {script} by hand as the finding's fix says", "edit the code by hand as the finding's fix says"),
               "mpsprof has no patcher for this rule")
"""A rule without an entry below (one of the user's own rules)."""
PLANNER_EDIT = "edit {where} by hand: {what}"
"""A planned fix whose construct was not where the finding says (the planner's reason follows)."""
PLANNER_OTHER = "edit by hand as the finding's fix says"
"""A planned fix refused before it found a place (the planner's sentence is the reason)."""
MORE = "; {n} more above"

PIP_TORCH = r"`(pip install -U torch)`"
FALLBACK_ENV = r"^(PYTORCH_ENABLE_MPS_FALLBACK=1 python \S+)"
BATCH_WHY = ("a batch size changes the optimisation, the learning rate that suits it and the steps per epoch, "
             "which a patch must not decide for you")

HAND: dict[str, Hand] = {
    "anomaly-detection-on": Hand(
        ("turn autograd's anomaly detection off where {anomaly_where} turns it on",
         "find the `set_detect_anomaly(True)` or `detect_anomaly()` that runs before training and remove it"),
        "the switch is not a line of the script: a library's option (Lightning's `Trainer(detect_anomaly=True)`), "
        "or a line the run did not record"),
    "dataloader-batch-indexing": Hand(
        ("build the batches of {loader_at} by hand: a BatchSampler over its dataset and `batch_size=None`",
         "build the DataLoader's batches by hand: a BatchSampler over its dataset and `batch_size=None`"),
        "it replaces the loader's sampler and collation, and only a dataset that takes a list of indices allows "
        "it, which its source does not tell"),
    "dataloader-handoff": Hand(
        ("replace {loader_at} and the loop that reads it by whole-batch indexing, by hand",
         "replace the DataLoader and the loop that reads it by whole-batch indexing, by hand"),
        "it rewrites the training loop, not an argument, and holds only for a dataset that fits in memory"),
    "dataloader-cpu-contention": Hand(
        ("measure again on a quiet machine; meanwhile give torch fewer threads: `{thread_fix_code}`",
         "measure again on a quiet machine"),
        "the loader waited for CPU cores that other work held, which no DataLoader argument changes", env=True),
    "device-mismatch-crash": Hand(
        ("edit {crash_at} by hand: every tensor it uses on the model's device ({crash_devices})",
         "edit {crash_at} by hand: every tensor it uses on the model's device",
         "put every tensor on the model's device by hand"),
        "which tensor is on the wrong device is known only when the script runs, not from its source"),
    "straggler-rank": Hand(
        ("give rank {straggler_rank} the same loading capacity as the others, by hand",),
        "the cause is a difference between ranks (disk, shard, free cores), not one line of the script"),
    "straggler-rank-work": Hand(
        ("move the work only rank {straggler_rank} does off the training loop, by hand",),
        "which work is rank-only is not in the recording, only its time"),
    "data-loading-imbalance": Hand(
        ("give every rank the same num_workers and a DistributedSampler, by hand",),
        "the ranks' loaders differ at run time; no one line of the script says how"),
    "rank-near-memory-limit": Hand(
        ("move the work only rank {rank_peak_limit_rank} does off the device, or lower its batch size, by hand",),
        "which work is rank-only is not in the recording, and " + BATCH_WHY),
    "mps-unavailable": Hand(
        ("install the arm64 torch wheel in a native arm64 Python: `{command}`",
         "install the arm64 torch wheel in a native arm64 Python"),
        "MPS is missing from this Python, torch or macOS, not from the script", env=True, command=PIP_TORCH),
    "rosetta-python": Hand(
        ("install a native arm64 Python and recreate the environment",),
        "the Python runs under Rosetta (x86_64); no line of the script changes that", env=True),
    "intel-mac": Hand(
        ("set `torch.set_num_threads({cores})` in {script} by hand", "tune the CPU run by hand"),
        "an Intel Mac has no MPS device: this is advice for the CPU run, not a line to fix"),
    "bf16-macos-crash": Hand(
        ("edit {crash_at} by hand: float32 in place of bfloat16 (float16 autocast from torch 2.5), or update "
         "macOS to 14",
         "use float32 in place of bfloat16 by hand (float16 autocast from torch 2.5), or update macOS to 14"),
        "bfloat16 on MPS needs macOS 14: whether to change the dtype or macOS is yours to choose"),
    "host-bound": Hand(
        ("raise batch_size where {loader_at} is built, or compile the model, by hand",
         "raise the batch size or compile the model, by hand"),
        BATCH_WHY),
    "long-warmup": Hand(
        ("start the timing code of {script} after step {benchmark_from_step}, by hand",),
        "nothing is wrong with the training, only with a timing that includes the warm-up, and where the script "
        "times (if it does) is not in the recording"),
    "long-first-step": Hand(
        ("start the timing code of {script} after step 0, by hand",),
        "nothing is wrong with the training, only with a timing that includes the compilation, and where the "
        "script times (if it does) is not in the recording"),
    "memory-taken-by-others": Hand(
        ("see which programs hold the memory while the run goes on (`{command}`) and close them",
         "see which programs hold the memory while the run goes on and close them"),
        "nothing in the training script caused it", env=True, command=r"`(top -o %MEM)`"),
    "near-device-limit": Hand(
        ("lower batch_size where {loader_at} is built (the fix suggests {suggested_batch_size}), or add autocast, "
         "by hand",
         "lower the batch size (the fix suggests {suggested_batch_size}), or add autocast, by hand",
         "lower the batch size or add autocast, by hand"),
        BATCH_WHY),
    "nonfinite-loss": Hand(
        ("lower the learning rate or clip the gradients in {script} by hand (`clip_grad_norm_` after backward)",),
        "which of them cures the divergence takes another run to tell; a patch cannot choose it"),
    "backward-twice-crash": Hand(
        ("replace {backward_calls} by one `backward()` of `{backward_sum}`, by hand",
         "add the losses of one forward pass and call `backward()` once, by hand"),
        "where the losses are summed is a change to the loop, which the finding shows and a patch leaves to you"),
    "inplace-modified-crash": Hand(
        ("run once with `torch.autograd.set_detect_anomaly(True)` to find the in-place op behind {crash_at}, "
         "then write it out of place, by hand",),
        "which operation changed the saved tensor is known only from anomaly detection's traceback"),
    "oom-crash-mps": Hand(
        ("edit {crash_at} by hand: batch_size={suggested_batch_size} (now {batch_size}) where the batch is made, "
         "or float16 autocast (torch 2.5+)",
         "lower the batch size (the fix suggests {suggested_batch_size}) or add float16 autocast (torch 2.5+), by hand",
         "lower the batch size or add float16 autocast (torch 2.5+), by hand"),
        BATCH_WHY),
    "oom-crash-cuda": Hand(
        ("edit {crash_at} by hand: batch_size={suggested_batch_size} (now {batch_size}) where the batch is made; "
         "less fragmentation needs no edit: `{command}`",
         "lower the batch size by hand; less fragmentation needs no edit: `{command}`",
         "lower the batch size by hand"),
        BATCH_WHY, command=r"^(PYTORCH_CUDA_ALLOC_CONF=\S+ python \S+)"),
    "oom-crash-cpu": Hand(
        ("edit {crash_at} by hand: check the size it allocates, else batch_size={suggested_batch_size} "
         "(now {batch_size})",
         "edit {crash_at} by hand: check the size it allocates, else a smaller batch",
         "check the size of the failed allocation, else lower the batch size, by hand"),
        "a wrong shape and a batch too large look the same in the recording, and " + BATCH_WHY),
    "op-not-implemented-crash": Hand(
        ("let {crash_op} fall back to the CPU: `{command}` (or replace it at {crash_at} by hand)",
         "let the op fall back to the CPU: `{command}`",
         "set PYTORCH_ENABLE_MPS_FALLBACK=1 in the environment before the script starts"),
        "torch reads the variable once, when it loads: it belongs to the environment the script starts in",
        env=True, command=FALLBACK_ENV),
    "cpu-fallback": Hand(
        ("replace the ops that run on the CPU (the finding lists them) by hand, or upgrade torch: `{command}`",
         "replace the ops that run on the CPU (the finding lists them) by hand"),
        "which op can stand for another is a change of the model that needs its author", command=PIP_TORCH),
    "mps-readiness": Hand(
        # the fix shows the line to add only where the run had no PYTORCH_ENABLE_MPS_FALLBACK=1
        ("on the Mac, `{command}` before `import torch`",
         "the run already had PYTORCH_ENABLE_MPS_FALLBACK=1 before `import torch`: keep it on the Mac, or replace "
         "the ops the finding lists by hand"),
        "this run was not on a Mac: which ops fall back there is a prediction until the job runs on one",
        env=True, command=r'(os\.environ\["PYTORCH_ENABLE_MPS_FALLBACK"\] = "1")'),
    "sync-heavy": Hand(
        ("pass `logging_nan_inf_filter=False` to the `TrainingArguments(...)` at {sync_fix_place}, by hand",
         "read the values synced at {sync_top_line} once every N steps, by hand",
         "read per-step values (`.item()`, `.cpu()`, `print(tensor)`) once every N steps, by hand"),
        "moving a read changes what the loop logs and when, which is the author's choice"),
    "sync-heavy-mac": Hand(
        ("pass `logging_nan_inf_filter=False` to the `TrainingArguments(...)` at {sync_fix_place}, by hand",
         "read the values synced at {sync_top_line} once every N steps, by hand",
         "read per-step values (`.item()`, `.cpu()`, `print(tensor)`) once every N steps, by hand"),
        "moving a read changes what the loop logs and when, which is the author's choice"),
    "layer-on-cpu": Hand(
        ("move module {layer_on_cpu_module} to {layer_on_cpu_device} by hand (`model.to(device)` after it is "
         "created or replaced)",),
        "where the module is created or swapped is not in the recording"),
    "no-step-signal": Hand(
        ("add `mpsprofiler.step()` at the end of each training step in {script} by hand",
         "add `mpsprofiler.step()` at the end of each training step by hand"),
        "no step was seen, so the recording has no line of the training loop to put it at"),
    "unobserved-child-processes": Hand(
        ("in place of `{child_site_code}` at {child_site}, run one trainer in the main process, or start the "
         "trainers as ranks (`mpsprof run --nproc-per-node N`), by hand",
         "run one trainer in the main process of {script}, or start the trainers as ranks (`mpsprof run "
         "--nproc-per-node N`), by hand"),
        "the training ran in child processes the profiler did not follow: their lines are not in the recording"),
    "other-programs-busy": Hand(
        ("close the other busy programs, or measure again when they are done{others_top_text}",),
        "they ran beside the training; nothing in the script makes them", env=True),
}
"""Rules without a planner: their fix is the user's to make."""
