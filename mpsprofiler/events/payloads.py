"""The fields of each event kind, as types: the wire contract in one place.

The probe and the launcher build these (mypy checks every key and value they write);
the session stores them and the views read them. Every class is ``total=False``: old
recordings lack newer fields, and a reader must take a missing field as unknown. A
recording is data from disk, so a reader still checks what it uses (a damaged or
hand-edited file may hold anything); these types say what a well-formed one holds.

Every event also has ``k`` (its kind) and ``ts`` (see :mod:`mpsprofiler.events`); those
are not repeated here. Events of a distributed run carry the rank as ``r``.
"""

from __future__ import annotations

from typing import Any, TypedDict


class Tagged(TypedDict, total=False):
    r: int
    """The rank of a distributed run (only there)."""


class HelloFields(Tagged, total=False):
    """``hello``: the probe's first line."""

    schema: int
    pid: int
    wall: float
    rank: int | None
    local_rank: int | None
    world_size: int | None
    version: str


class RunFields(TypedDict, total=False):
    """``run``: written by the launcher before the child starts."""

    script: str
    target: str
    module: bool
    argv: list[Any]
    cwd: str
    run_dir: str | None
    mode: str
    """``"tui"`` or ``"headless"``."""
    started: float
    python: str
    mpsprof: str
    settings: list[str]
    """``--set`` changes as the user wrote them (absent without any)."""
    settings_replaced: dict[str, str]
    """Name -> the shell's value of each variable ``--set`` gave another value
    (``settings.shell_replaced``; absent where none)."""
    max_steps: int
    max_seconds: float
    env_digest: dict[str, str]
    """Name -> keyed digest of each environment variable's value in the shell ``mpsprof run``
    started from (``launcher/env_digest.py``; never the values): ``try`` and ``patch
    --prove`` say which differ in theirs."""
    ranks: dict[str, Any]
    """A ``ranks`` event's fields, folded in by the session."""


class EnvFields(Tagged, total=False):
    """``env``: machine, Python and torch facts (``environment.collect_environment``)."""

    python: str
    python_executable: str | None
    platform: str
    os: str | None
    macos_version: str | None
    machine: str | None
    chip: str | None
    apple_silicon: bool
    rosetta: bool
    cores_logical: int | None
    cores_physical: int | None
    cores_performance: int | None
    memory_total: int | None
    torch: str | None
    torch_cuda: str | None
    mps_built: bool | None
    mps_available: bool | None
    cuda_available: bool | None
    cuda_device_count: int | None
    cuda_device_name: str | None
    torch_threads: int | None
    omp_num_threads: str | None
    pytorch_env: dict[str, str]
    torch_import_cpu_s: float
    """CPU seconds the script's ``import torch`` took this process (probe/import_watch.py):
    what each DataLoader worker started with spawn spends again (absent: not watched)."""
    numpy: str | None
    """``mpsprof doctor`` only (never imported inside the training process)."""
    nvidia_driver: bool | None
    """``mpsprof doctor`` only: whether Linux has an NVIDIA driver loaded."""


class ModelFields(Tagged, total=False):
    """``model``: the parameters the first optimizer step updates."""

    device: str
    device_kind: str
    device_name: str
    devices: list[str]
    dtypes: list[str]
    parameters: int
    optimizer: str
    torch_threads: int | None
    threads_set: list[dict[str, Any]]
    """The script's ``torch.set_num_threads`` calls before the first step: file, line, n."""
    default_dtype: str | None
    """``torch.get_default_dtype()`` at the first step, without ``torch.`` (float32 unless set)."""
    framework: str | None
    """lightning, lightning fabric, transformers Trainer, accelerate (probe/frameworks.py), None: plain torch."""
    fetched_ahead: int
    """DataLoader batches fetched before the first optimizer step, not counted as steps."""


class DataLoaderFields(Tagged, total=False):
    """``dataloader``: one DataLoader's configuration, numbered from 1 as first iterated."""

    id: int
    batch_size: int | None
    num_workers: int | None
    pin_memory: bool
    prefetch_factor: int | None
    persistent_workers: bool
    len: int | None
    dataset: str | None
    iterable: bool
    """The dataset is an ``IterableDataset`` (every worker iterates its own copy)."""
    framework: str | None
    """The framework whose code iterated the loader first (probe/frameworks.py), None: plain torch."""
    iterable_split: bool
    """Its ``__iter__`` (a method of its class) calls ``get_worker_info()``, or the loader has
    a ``worker_init_fn``: each worker gets its share of the stream."""
    batch_sampler: str | None
    multiprocessing_context: str | None
    start_method_set: str | None
    """``multiprocessing.get_start_method(allow_none=True)`` when the loader was built: the
    method the script fixed for the process, None for the platform's default."""
    thread: str
    created: int
    """Construction number in the training process (1: the first DataLoader built), as
    ``--set dataloader.N.*`` counts them; ``id`` counts first iterations."""
    created_by_then: int
    """DataLoaders built in the training process when this one was first iterated: a
    loader built again at its line after that is a rebuild (session/loaders.py), one built
    before it (two validation loaders made together) is another loader."""
    file: str
    line: int
    """The script's line that built the loader."""
    call_file: str
    call_line: int
    call_func: str
    """Where the function holding that line was called from, and its name (a helper that
    builds several loaders); absent at a module's top level."""
    role: str
    """``eval`` or ``test``: a framework's evaluation hook built it (probe/loader_sites.py,
    ``ROLE_HOOKS``: the Trainer's ``get_eval_dataloader``, Lightning's ``val_dataloader``);
    absent for the others."""
    hook: str
    """The framework method that built it (probe/loader_sites.py, ``FRAMEWORK_HOOKS``:
    Lightning's ``train_dataloader`` and ``val_dataloader``, the Trainer's
    ``get_train_dataloader`` ...): the name the user knows it by; absent for the others."""
    fetches: int
    fetch_s: float
    """Batches taken from this loader (each iterator's first left out) and the training's
    wall time waiting for them; sent again as they grow."""
    first_fetches: int
    first_fetch_s: float
    """Iterators' first batches taken from it and the training's wall time waiting for them
    (each includes starting the pass's workers); absent in older recordings."""
    iters: int
    """Iterators started over it (probe/loader_sites.py): its passes, where its workers are
    not persistent; absent in older recordings."""
    after_fetches: int
    after_fetch_s: float
    """Of ``fetches`` and ``fetch_s``: those taken after the last step ended (sent at exit:
    an evaluation or test pass after the training, which no step waited for)."""
    after_first_fetches: int
    after_first_fetch_s: float
    """Of ``first_fetches`` and ``first_fetch_s``: those taken after the last step ended (the
    first batch of a pass begun there); absent in older recordings."""
    batch_tensors: int
    """Tensors in one of its batches (the first timed one): what a worker hands over."""
    batch_form: str
    """That batch's shape (probe/loader_sites.py ``batch_form``): ``pair``, ``dict`` or ``mixed``;
    absent in older recordings."""
    rebuilt: int
    created_all: list[int]
    """Session-side (session/loaders.py): constructions at one place merged into this record,
    and their construction numbers."""
    index_calls: int
    index_s: float
    """Calls of ``_BaseDataLoaderIter._next_index`` timed (a sample: probe/loader_sites.py)
    and their seconds: drawing a batch's indices from the (batch) sampler, which torch does
    in the training process whatever ``num_workers`` is."""
    sampler: str | None
    """The class name of the loader's ``sampler`` (``batch_sampler`` names the batch sampler
    around it): the one a slow index draw is put down to when the batch sampler is torch's."""
    batch_sampler_at: list[Any] | None
    """``[file, line]`` of the batch sampler's ``__iter__`` when its class is the script's
    own (probe/loader_config.py), else absent or None."""
    sampler_at: list[Any] | None
    """The same for the ``sampler``."""
    consumes: int
    consume_s: float
    """Time from one of its batches' arrival to the next request of the same iterator,
    summed (``consumes`` gaps): what the script does with each of this loader's batches. A
    validation loader's is its evaluation per batch, not the training step's."""
    consume_steps: int
    """How many of those gaps held a step boundary (probe/loader_sites.py): none over several
    gaps while another loader's did, and its batches are read between the steps."""


class StepAggregate(TypedDict, total=False):
    """``steps.agg``: exact aggregates of steps not sent one by one."""

    n: int
    dur_sum: float
    wait_sum: float
    dur_min: float
    dur_max: float
    i_last: int
    hist: dict[str, int]
    """Log-bucket index (a string: JSON keys are) -> count of steps."""
    batches: int
    wait_cpu_sum: float
    wait_runq_sum: float | None
    phase_n: int
    pre_sum: float
    bwd_sum: float
    phase_wait_sum: float
    """Data wait of the ``phase_n`` steps (absent in recordings before session 56)."""
    phase_dur_sum: float
    sample: list[Any]
    """One step of the batch in STEP_COLUMNS order, for the charts: the last, or the last
    with a device-memory reading if it ended within 0.1 s of the last."""
    idle_n: int
    """Steps whose data wait found the device idle (absent in older recordings)."""
    busy_n: int
    """... found the device still busy."""
    end_last: float
    """End time of the batch's last step (older recordings: the sample's)."""
    peak: list[Any]
    """The batch's slowest step, as ``sample``, when it is not the sample (absent in older
    recordings): the charts show a pause among fast steps."""


class StepsFields(Tagged, total=False):
    """``steps``: a batch of steps, columnar (see ``STEP_COLUMNS`` and the others)."""

    i: list[int]
    end: list[float]
    dur: list[float]
    wait: list[float]
    batches: list[int]
    idle: list[int | None]
    alloc: list[int | None]
    wait_cpu: list[float]
    wait_runq: list[float | None]
    pre: list[float | None]
    bwd: list[float | None]
    mode: str
    """How steps are found: ``optimizer``, ``backward``, ``dataloader``, ``manual`` or ``none``."""
    optimizers: int
    """Optimizers that step in one step, where more than one (a GAN's two: Lightning's
    ``global_step`` counts each of their steps)."""
    agg: StepAggregate
    rows: dict[str, Any]
    """On the probe's pipe only: the steps as packed rows (``events/step_rows.py``), which
    decoding turns into the columns above; never in a recording."""
    origin: float
    """With ``rows``: the probe clock's reading at its start, taken off the rows' times."""
    agg_rows: dict[str, Any]
    """On the probe's pipe only: the steps past the detail as packed rows, which decoding
    turns into ``agg`` (``events/step_agg.py``); never in a recording."""
    agg_slowed: list[int]
    """On the probe's pipe only: which of ``agg_rows`` a wake of the probe's channel
    overlapped (never the chart's peak, ``events/step_agg.py`` ``peak_besides``)."""
    restart: bool
    """True once, where training began after DataLoader-counted steps were sent (a
    validation pass before training): the steps sent before this event were no training
    steps, and this event's start again at 0 (probe/steps.py ``_training_begins``)."""


class MemFields(Tagged, total=False):
    """``mem``: a memory and CPU sample of the training process and its workers."""

    rss: int | None
    rss_children: int | None
    workers: int
    sys_available: int | None
    sys_total: int | None
    swap_used: int | None
    cpu_pct: float | None
    cpu_main_s: float | None
    cpu_workers_s: float
    cpu_workers_startup_s: float
    """CPU seconds of ``cpu_workers_s`` that workers spent before their first batch
    (probe/worker_startup.py: forked DataLoader workers only); absent in older recordings."""
    runq_workers_s: float | None
    sys_busy: float | None
    sys_steal: float | None
    """Share of all CPU time stolen by a hypervisor since the last sample (Linux); absent in
    older recordings."""
    runq_main_s: float | None
    """Seconds the main thread waited for a core so far (Linux ``schedstat``); None elsewhere."""
    device: dict[str, int | None]
    """``devices.MemoryFigures.as_dict()``; absent without a device reading."""
    others: list[list[Any]]
    """``[[name, pid, rss], ...]``: the largest other programs, only while memory is short
    (``probe/others.py``); absent otherwise."""


class WarningFields(Tagged, total=False):
    """``warning``: a Python warning the script raised (repeats counted, not resent)."""

    category: str
    message: str
    filename: str
    lineno: int | None
    count: int
    dropped_distinct: int
    """Only in the note sent past the cap (no category, no message): distinct messages
    whose texts were not kept (a lower bound past 100,000), and ..."""
    dropped_count: int
    """... how many times they were shown in all (exact)."""


class OpsFields(Tagged, total=False):
    """``ops``: op accounting of one sampled step (``probe/ops_record.py`` builds the rows)."""

    step: int
    host_s: float
    bookkeeping_s: float
    device_kind: str
    model_device: str | None
    ops: list[dict[str, Any]]
    ops_dropped: int
    syncs: list[dict[str, Any]]
    float64: dict[str, Any]
    bf16_complex: dict[str, int]
    mismatch: list[dict[str, Any]]
    mps_kernel: list[dict[str, Any]]
    partial: bool
    truncated: bool
    from_backward: bool
    """The sample began at its step's backward pass: the one before was cut in its forward
    pass (``probe/ops.py``, ``SAMPLE_CAP_STEPS``), so these are the ops it left unseen."""
    anomaly: dict[str, Any]
    """Autograd's anomaly detection was on at the step's backward pass: ``check_nan`` and the
    script's ``sites`` that turned it on (file, line, calls; ``probe/anomaly.py``)."""
    overhead_s: float | None
    interval: int
    cost_s: float
    steps_s: float
    converged: bool
    wakes: int
    planned: int
    """The run's length in steps as its framework announced it (a Trainer's ``max_steps``),
    where one did: op accounting plans its early samples within the budget of that run."""


class Frame(TypedDict, total=False):
    """One frame of an ``exception`` event's traceback, innermost last."""

    file: str
    line: int | None
    func: str
    code: str
    user: bool
    """Whether the frame is in the user's own code (not a library, not the stdlib)."""


class ExceptionFields(Tagged, total=False):
    """``exception``: the script's uncaught exception."""

    type: str
    module: str
    message: str
    frames: list[Frame]


class ProbeErrorFields(Tagged, total=False):
    """``probe_error``: an instrument failed and was switched off (the training went on)."""

    instrument: str
    message: str
    where: str
    """mpsprof's frame the failure passed through last: ``FILE:LINE in FUNC``."""


class ExitFields(TypedDict, total=False):
    """``exit``: written by the launcher once the child ended."""

    returncode: int
    duration: float
    signal: int
    signal_name: str
    stopped_by_user: bool
    bad_lines: int
    channel_closed_at: float
    spilled_lines: int
    probe_done: bool


class ByeFields(Tagged, total=False):
    """``bye``: the probe's last line; ``dropped`` events were lost (``reason``)."""

    dropped: int
    spilled: bool
    reason: str


class LeaksFields(Tagged, total=False):
    """``leaks``: tensors outliving their step, by the line that made them."""

    step: int
    lag: int
    """Steps a tensor must outlive to count."""
    sites: list[dict[str, Any]]
    carries: list[dict[str, Any]]
    between: list[dict[str, Any]]
    """Containers grown between the steps with graphs (probe/leak_between.py)."""


class OverrideFields(Tagged, total=False):
    """``override``: a ``--set`` change applied (``applied``: name -> [before, after]) or
    refused (``skipped``: setting and reason) inside the script."""

    target: str
    applied: dict[str, list[Any]]
    skipped: list[dict[str, str]]


class CutFields(Tagged, total=False):
    """``cut``: ``--max-steps`` / ``--max-seconds`` ended the run cleanly."""

    reason: str
    """``"max_steps"`` or ``"max_seconds"``."""
    steps: int
    max_steps: int | None
    max_seconds: float | None
    seconds: float


class ChildFields(Tagged, total=False):
    """``child``: a process the script started (not a DataLoader worker), not followed."""

    name: str
    target: str
    method: str
    pid: int | None
    via: str  # "spawn": torch.multiprocessing.spawn; "process": a Process started by the script
    file: str  # the script's line that started it (absent where no frame was the script's)
    line: int


class OtherProgram(TypedDict):
    """One program outside the training's tree: its name (``python spin.py``) and cores' worth of CPU."""

    name: str
    cores: float


class OthersFields(TypedDict, total=False):
    """``others`` (written by the launcher): the busiest programs outside the training's
    process tree, over the run so far (``window_s``)."""

    window_s: float
    top: list[OtherProgram]


class HealthFields(TypedDict, total=False):
    """``health``: one of four readings, told apart by ``what``: ``loss`` (the first
    non-finite loss and what preceded it), ``loss_checks`` (how many losses were checked,
    at the end), ``device_time`` (one timed step's device busy time, probe/device_time.py),
    ``device_timing_off`` (why timing stopped), ``device_timing_cost`` (at the end: what
timing cost, over how much training, how often the budget held it back), ``copies`` (a loader's pageable batches,
    probe/copies.py) and ``copy_time`` (one op-sampled step's host-to-device copies on CUDA:
    ``copies`` timed, ``untimed`` past the cap, ``bytes``, ``pinned_bytes``, their device time
    ``ms`` and the pageable ones' ``pageable_ms``, probe/copies.py ``CopyTimer``)."""

    what: str
    step: int
    value: str
    checked: str | None
    last_finite_step: int | None
    last_finite_loss: float | None
    lr: float | str | None
    lr_first: float | None
    optimizer: str | None
    grad_norm_last: float | str | None
    grad_norm_last_step: int | None
    grad_norm_first_bad_step: int | None
    grad_norm_median: float | None
    fp16_autocast: bool
    grad_scaler: bool
    param_dtypes: list[str]
    n: int
    steps: int
    sampled_from: int
    every: int
    busy_s: float
    host_s: float
    hold_s: float
    valid: bool
    rearmed: bool
    reason: str
    loader: int
    batches: int
    pageable_batches: int
    bytes_per_batch: int
    pinned_bytes_per_batch: int
    pin_memory: bool
    cost_s: float
    run_s: float
    paused: int
    readings: int
    copies: int
    untimed: int
    bytes: int
    pinned_bytes: int
    ms: float
    pageable_ms: float


class TerminalFields(Tagged, total=False):
    """``terminal`` (control, never recorded): the script wants the terminal, or is done."""

    want: bool
