"""CPU thread facts: intra-op threads plus DataLoader workers against the cores.

Busy threads are counted as torch's intra-op threads of the training process plus one
per DataLoader worker: torch sets every worker to one thread
(``torch.set_num_threads(1)`` in ``torch/utils/data/_utils/worker.py``), so a worker
adds one busy thread, not ``torch_threads`` more. Oversubscribed OpenMP threads spin
and wait for each other (a 3 ms CPU step has been seen to take 180 ms with 2 OpenMP
threads while the other core was busy).
"""

from __future__ import annotations

from typing import Any

from ...session.session import Session
from .common import num, rounded, training_loader
from .registry import analyzer

THREAD_FACTS: tuple[str, ...] = (
    "busy_threads", "cores", "max_workers_for_cores", "omp_num_threads", "suggested_torch_threads",
    "thread_oversubscription", "torch_threads",
)
"""Every fact the ``threads`` analyzer may return (declared: no other analyzer may provide one)."""


@analyzer("threads", provides=THREAD_FACTS)
def thread_facts(session: Session) -> dict[str, Any]:
    env = session.env
    # a thread count seen while training (if the probe reports one) beats the start-up one:
    # scripts call torch.set_num_threads() after the probe read the environment
    threads = num(session.model.get("torch_threads")) or num(env.get("torch_threads"))
    cores = num(env.get("cores_physical")) or num(env.get("cores_logical"))
    loader = training_loader(session)
    workers = int(num(loader.get("num_workers")) or 0) if loader else 0
    facts: dict[str, Any] = {
        "torch_threads": int(threads) if threads else None,
        "cores": int(cores) if cores else None,
        "omp_num_threads": env.get("omp_num_threads"),
    }
    if not threads or not cores:
        return facts
    busy = int(threads) + workers
    facts["busy_threads"] = busy
    facts["thread_oversubscription"] = rounded(busy / cores, 3)
    facts["suggested_torch_threads"] = max(1, int(cores) - workers)
    facts["max_workers_for_cores"] = max(0, int(cores) - int(threads))
    return facts
