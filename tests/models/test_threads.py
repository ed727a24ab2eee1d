"""`model.threads: 0` leaves alone the cores other processes keep busy: torch's every-core default
collapses on a machine where one of them is taken (2 cores, one busy: a small forward 1.74 s at 2
threads against 57 ms at 1)."""

from __future__ import annotations

import pytest

from agentic_rl.models import threads


@pytest.fixture
def machine(monkeypatch):
    def set_machine(cores: int, busy: float | None) -> None:
        monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
        monkeypatch.setattr(threads.os, "sched_getaffinity", lambda pid: set(range(cores)))
        monkeypatch.setattr(threads, "busy_cores", lambda: busy)

    return set_machine


@pytest.mark.parametrize(("cores", "busy", "want"), [
    (2, 0.1, 2),  # idle: every core
    (2, 1.0, 1),  # one core taken elsewhere: one thread
    (2, 2.0, 1),  # both taken: still one
    (8, 2.6, 5),  # 3 of 8 busy (rounded)
    (4, None, 4),  # no /proc/stat: every core, as torch would
])
def test_auto_threads_take_the_cores_others_leave_idle(machine, cores, busy, want):
    machine(cores, busy)
    assert threads.auto_threads().count == want


def test_omp_num_threads_stands(monkeypatch):
    # torchrun sets OMP_NUM_THREADS=1 for each process; a user may set it too: torch's reading of it stands
    import torch

    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.setattr(threads, "busy_cores", lambda: pytest.fail("measured although OMP_NUM_THREADS is set"))
    choice = threads.auto_threads()
    assert choice.count == torch.get_num_threads() and "OMP_NUM_THREADS=1" in choice.why


def test_busy_cores_reads_this_machines_load():
    # a real reading: between 0 and every core (this test's own process sleeps while it is taken)
    import os

    busy = threads.busy_cores(0.05)
    assert busy is None or 0.0 <= busy <= (os.cpu_count() or 1) + 1e-9
