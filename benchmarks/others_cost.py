"""CPU time of one listing of other programs by the launcher (launcher/others.py): from
``/proc/<pid>/stat`` (Linux) against psutil's listing (what other systems use, and what
Linux used before issue 34, less its second listing for the training's tree).

Process CPU time (``time.process_time``), not wall time: the listing runs every 2 s in the
launcher, and on a one-core machine its CPU is taken from the training. The first listing
of each sampler is left out (it names the processes that used CPU since the epoch here).

    python benchmarks/others_cost.py [--listings 50] [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import time

import psutil

from mpsprofiler.launcher.others import OtherPrograms


def per_listing(proc_fs: bool, listings: int) -> float:
    """Seconds of this process's CPU per listing, over ``listings`` of them."""
    sampler = OtherPrograms()
    if not proc_fs:
        sampler._proc = False
    sampler._t0, sampler._wall0 = time.monotonic(), time.time()
    sampler._read(sampler._list(psutil), os.getpid())
    t0 = time.process_time()
    for _ in range(listings):
        sampler._read(sampler._list(psutil), os.getpid())
    return (time.process_time() - t0) / listings


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--listings", type=int, default=50)
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()
    if not os.path.isdir("/proc/self"):
        raise SystemExit("no /proc here: the launcher lists with psutil alone")
    for _ in range(args.rounds):
        slow, fast = per_listing(False, args.listings), per_listing(True, args.listings)
        print(f"{len(psutil.pids())} processes: psutil {slow * 1e3:.2f} ms CPU a listing, "
              f"/proc {fast * 1e3:.2f} ms ({fast / slow:.0%})")


if __name__ == "__main__":
    main()
