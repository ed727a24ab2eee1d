"""The memory limit of a sandboxed execution as a whole: every process of it, and every RAM-backed
filesystem it can write.

`RLIMIT_AS` bounds each process alone, so a program that forks N children holds N times the limit;
and a file in a RAM-backed filesystem is host memory no process owns. Two guards close that:

- **cgroup** (where agentic-rl may create a memory cgroup: root on a cgroup v1 memory hierarchy, or
  a cgroup v2 subtree delegated with the memory controller): each execution gets a cgroup of its own
  with `memory_mb` as its limit, swap included where the kernel accounts it. Every process of the
  execution is in it from its first instruction (a shell writes its own pid into the cgroup, then
  execs the sandbox), and so is every page of tmpfs they write. Past the limit the kernel's OOM
  killer kills inside the cgroup; the result says `killed_by: memory`. The guarantee is the kernel's.
  Where the kernel kills only the largest process, the rest of the execution runs on within the limit.
- **supervisor** (anywhere else): a thread sums the resident memory of the execution's process tree
  and what its `/tmp` and `/dev/shm` hold, every 20 ms, and kills the whole tree when the sum passes
  `memory_mb`. The guarantee is up to one polling interval of allocation past the limit.

In both, the only RAM-backed filesystems the sandbox can write are sized, `/tmp` (`tmp_size_mb`) and
`/dev/shm` (`shm_size_mb`), and `/dev` itself is read-only.
"""

from __future__ import annotations

import itertools
import os
import signal
import threading
from pathlib import Path

_names = itertools.count()
POLL_S = 0.02


class CgroupGuard:
    """A memory cgroup of its own for one execution; `wrap(argv)` starts the argv inside it."""

    kind = "cgroup"

    def __init__(self, parent: Path, limit_bytes: int):
        self.path = parent / f"agentic-rl-sandbox-{os.getpid()}-{next(_names)}"
        self.path.mkdir()
        self.v2 = (self.path / "memory.max").exists()
        try:
            if self.v2:
                (self.path / "memory.max").write_text(str(limit_bytes))
                if (self.path / "memory.swap.max").exists():
                    (self.path / "memory.swap.max").write_text("0")
            else:
                (self.path / "memory.limit_in_bytes").write_text(str(limit_bytes))
                if (self.path / "memory.memsw.limit_in_bytes").exists():  # memory + swap: no escape to swap
                    (self.path / "memory.memsw.limit_in_bytes").write_text(str(limit_bytes))
        except OSError:
            self.close()
            raise

    def wrap(self, argv: list[str]) -> list[str]:
        # the shell joins the cgroup, then becomes the sandbox: nothing runs outside it
        return ["/bin/sh", "-c", 'echo $$ > "$1" && shift && exec "$@"', "sh", str(self.path / "cgroup.procs"), *argv]

    def watch(self, pid: int) -> None:
        pass

    def kills(self) -> int:
        """How many of the execution's processes the kernel has killed for memory so far."""
        name = "memory.events" if self.v2 else "memory.oom_control"
        try:
            fields = dict(line.split() for line in (self.path / name).read_text().splitlines() if line)
        except (OSError, ValueError):
            return 0
        return int(fields.get("oom_kill", 0))

    def close(self) -> None:
        """Kill whatever is left in the cgroup and remove it (a cgroup with processes cannot be)."""
        for _ in range(50):
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                for pid in _pids(self.path / "cgroup.procs"):
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                threading.Event().wait(0.02)  # the killed may still be exiting


def _pids(procs: Path) -> list[int]:
    try:
        return [int(p) for p in procs.read_text().split()]
    except (OSError, ValueError):
        return []


class SupervisorGuard:
    """Sums the resident memory of the execution's process tree every POLL_S and kills it past the
    limit (where no cgroup can be made)."""

    kind = "supervisor"

    def __init__(self, limit_bytes: int):
        self.limit = limit_bytes
        self.page = os.sysconf("SC_PAGE_SIZE")
        self._killed = threading.Event()
        self._done = threading.Event()
        self._thread: threading.Thread | None = None

    def wrap(self, argv: list[str]) -> list[str]:
        return argv

    def watch(self, pid: int) -> None:
        self._thread = threading.Thread(target=self._poll, args=(pid,), name="agentic-rl-memory", daemon=True)
        self._thread.start()

    def _poll(self, pid: int) -> None:
        while not self._done.wait(POLL_S):
            tree = _tree(pid)
            if not tree:
                return
            if sum(self._rss(p) for p in tree) + _tmpfs_used(tree[-1]) > self.limit:
                self._killed.set()
                for p in reversed(tree):  # the leaves first, so nothing is reparented
                    try:
                        os.kill(p, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                return

    def _rss(self, pid: int) -> int:
        try:
            return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * self.page
        except (OSError, IndexError, ValueError):
            return 0

    def kills(self) -> int:
        """1 once the tree was killed for memory."""
        return int(self._killed.is_set())

    def close(self) -> None:
        self._done.set()
        if self._thread is not None:
            self._thread.join(timeout=1.0)


def _tmpfs_used(pid: int) -> int:
    """What the sandbox's own RAM-backed filesystems hold, seen through the root of a process inside
    it; 0 for a process that shares the host's root (the unsandboxed fallback) or cannot be seen."""
    root = f"/proc/{pid}/root"
    try:
        if os.stat(root).st_dev == os.stat("/").st_dev:
            return 0
        used = 0
        for mount in ("tmp", "dev/shm"):
            st = os.statvfs(f"{root}/{mount}")
            used += (st.f_blocks - st.f_bfree) * st.f_frsize
        return used
    except OSError:
        return 0


def _tree(pid: int) -> list[int]:
    """`pid` and its descendants, parents first."""
    out, frontier = [], [pid]
    while frontier:
        p = frontier.pop()
        if not Path(f"/proc/{p}").exists():
            continue
        out.append(p)
        try:
            frontier += [int(c) for t in Path(f"/proc/{p}/task").iterdir()
                         for c in (t / "children").read_text().split()]
        except (OSError, ValueError):
            pass
    return out


def memory_cgroup_parent() -> Path | None:
    """Where this process may create memory cgroups: its own memory cgroup (v1), or its own cgroup
    v2 directory when the memory controller is delegated to its children; None elsewhere."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(","):
            base = Path("/sys/fs/cgroup/memory") / path.lstrip("/")
            if (base / "memory.limit_in_bytes").exists() and os.access(base, os.W_OK):
                return base
    for line in lines:
        if line.startswith("0::"):
            base = Path("/sys/fs/cgroup") / line[3:].lstrip("/")
            control = base / "cgroup.subtree_control"
            if control.exists() and "memory" in control.read_text().split() and os.access(base, os.W_OK):
                return base
    return None


def memory_guard(limit_mb: int, mode: str = "auto"):
    """The guard for one execution: a cgroup where one can be made (`mode` "auto" or "cgroup"), else
    the supervisor ("auto" or "supervisor")."""
    limit = limit_mb << 20
    if mode in ("auto", "cgroup"):
        parent = memory_cgroup_parent()
        if parent is not None:
            try:
                return CgroupGuard(parent, limit)
            except OSError:
                if mode == "cgroup":
                    raise
        elif mode == "cgroup":
            raise OSError("no memory cgroup can be created here (needs root on a cgroup v1 memory hierarchy "
                          "or a delegated cgroup v2 subtree with the memory controller)")
    return SupervisorGuard(limit)
