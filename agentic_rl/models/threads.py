"""How many torch threads a run uses when the recipe leaves it to us (`model.threads: 0`).

torch's default is every core. On a machine where something else keeps a core busy that default
collapses rather than slows: the threads of one operation wait at a barrier for the one the OS has
descheduled (measured on 2 cores with one busy: a small forward 1.74 s at 2 threads, 57 ms at 1; a
cut SmolLM2 run 9-12 min against 1 min 40 s). So "auto" counts the cores other processes keep busy
at the start of the run and leaves them alone. Where the environment already says (OMP_NUM_THREADS,
which torchrun sets to 1 for each process), torch's reading of it stands.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class ThreadChoice:
    count: int
    why: str  # for the startup line


def _cpu_times() -> tuple[float, float] | None:
    """(busy, total) jiffies of every CPU since boot, from /proc/stat (None where there is none)."""
    try:
        with open("/proc/stat") as f:
            fields = [float(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0.0)  # idle + iowait
    return sum(fields[:8]) - idle, sum(fields[:8])  # user .. steal; guest time is inside user


def busy_cores(interval_s: float = 0.3) -> float | None:
    """How many of the machine's cores were busy over the next `interval_s` (this process sleeps
    meanwhile, so the load is other processes'); None where /proc/stat is not readable."""
    before = _cpu_times()
    time.sleep(interval_s)
    after = _cpu_times()
    if before is None or after is None or after[1] <= before[1]:
        return None
    return (after[0] - before[0]) / (after[1] - before[1]) * (os.cpu_count() or 1)


def auto_threads() -> ThreadChoice:
    """The cores this process may run on, less those other processes keep busy (at least one)."""
    if os.environ.get("OMP_NUM_THREADS"):
        return ThreadChoice(torch.get_num_threads(), f"OMP_NUM_THREADS={os.environ['OMP_NUM_THREADS']}")
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    busy = busy_cores()
    if busy is None:
        return ThreadChoice(cores, f"{cores} cores")
    count = max(1, min(cores, cores - round(busy)))
    why = f"{cores} cores, {busy:.1f} busy elsewhere" if count < cores else f"{cores} cores, idle"
    return ThreadChoice(count, why)
