"""Run model-written Python in a bubblewrap sandbox.

What the sandboxed program gets: its own user, PID, IPC, UTS, cgroup and network namespaces (no
network at all: only its own loopback), a read-only view of /usr (the interpreter and its standard
library) and nothing else of the host's filesystem, a private size-capped tmpfs at /tmp as its
working directory, a read-only /dev with a size-capped /dev/shm, an empty environment, a memory limit
on the execution as a whole (`memory.py`: a cgroup of its own, or a supervisor), and rlimits on CPU
time, address space, file size, process count and core dumps. bwrap is started as an unprivileged user (a fresh uid of its own, from 200000 up,
when the host runs as root), so even a sandbox escape lands in an account that owns nothing. A wall-clock timeout kills the whole
sandbox; stdout and stderr are drained continuously and kept up to a character budget.

Without bwrap, `SandboxUnavailable` says how to install it; `allow_unsandboxed=True` runs the code in
a plain subprocess with the same rlimits and a loud warning (no network or filesystem isolation).
"""

from __future__ import annotations

import itertools
import json
import os
import resource
import select
import shutil
import signal
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from agentic_rl.faults import InfrastructureError
from agentic_rl.tools.sandbox.memory import memory_guard

UID_BASE, UID_SPAN = 200_000, 1_000_000  # sandbox uids: unused by any account, one per sandbox
_uids = itertools.count()


class SandboxUnavailable(InfrastructureError):
    """The sandbox could not start: the machine's failure, not the code's (`faults.py`)."""

    kind = "sandbox_start"


@dataclass(frozen=True)
class SandboxConfig:
    timeout_s: float = 5.0  # wall clock, whole run (one-shot) or one cell (session)
    cpu_s: int = 0  # RLIMIT_CPU; 0 = ceil(timeout_s) + 1
    memory_mb: int = 512  # the execution as a whole (`memory.py`), and RLIMIT_AS of each process
    memory_guard: str = "auto"  # "cgroup", "supervisor", or "auto": a cgroup where one can be made
    file_size_mb: int = 16  # RLIMIT_FSIZE: the largest file it may write
    tmp_size_mb: int = 64  # size of the private /tmp
    shm_size_mb: int = 16  # size of /dev/shm; the rest of /dev is read-only
    max_procs: int = 32  # RLIMIT_NPROC of the sandbox user
    max_output_chars: int = 4000  # per stream
    python: str = ""  # interpreter inside the sandbox; "" = this one if the sandbox user can reach it, else /usr/bin/python3
    bwrap: str = "bwrap"
    allow_unsandboxed: bool = False  # opt-in fallback without bwrap: NO network or filesystem isolation


@dataclass(frozen=True)
class ExecResult:
    stdout: str
    stderr: str
    exit_code: int
    timed_out: bool
    killed_by: str | None  # "timeout", "memory", or the signal's name (SIGKILL, SIGXCPU, SIGXFSZ, ...)
    duration_s: float

    def to_json(self) -> str:
        return json.dumps(asdict(self))


def run_python(code: str, config: SandboxConfig | None = None) -> ExecResult:
    """Run `code` as a fresh program in the sandbox."""
    config = config or SandboxConfig()
    return execute(command(config, ["-c", code]), config)


def command(config: SandboxConfig, python_args: list[str], mounts: Sequence[str] = ()) -> list[str]:
    """The full argv: [setpriv ...] bwrap ... python -I -S <python_args>. `mounts`: more bwrap mount
    arguments (a repository session's own tmpfs), made before the root is remounted read-only."""
    bwrap = shutil.which(config.bwrap)
    python = interpreter(config)
    inner = [python, "-I", "-S", "-u", *python_args]  # unbuffered: output before a kill is kept
    if bwrap is None:
        if not config.allow_unsandboxed:
            raise SandboxUnavailable(
                f"bubblewrap ({config.bwrap!r}) is not installed: `apt-get install bubblewrap` (Debian/Ubuntu) "
                "or `dnf install bubblewrap`; or opt in to an unsandboxed fallback with allow_unsandboxed=True")
        warnings.warn("running model code WITHOUT the sandbox: rlimits only, no network or filesystem isolation",
                      RuntimeWarning, stacklevel=3)
        return inner
    argv = [bwrap, "--unshare-all", "--unshare-user", "--die-with-parent", "--new-session", "--ro-bind", "/usr", "/usr"]
    for top in ("/bin", "/lib", "/lib64", "/sbin"):  # merged-/usr symlinks, or the real directories
        if os.path.islink(top):
            argv += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            argv += ["--ro-bind", top, top]
    prefix = Path(python).resolve().parents[1]
    if not str(prefix).startswith("/usr"):
        argv += ["--ro-bind", str(prefix), str(prefix)]
    argv += ["--proc", "/proc", "--dev", "/dev", "--size", str(config.shm_size_mb << 20), "--tmpfs", "/dev/shm",
             "--remount-ro", "/dev", "--size", str(config.tmp_size_mb << 20), "--tmpfs", "/tmp", *mounts,
             "--chdir", "/tmp", "--clearenv", "--setenv", "PATH", "/usr/bin:/bin", "--setenv", "HOME", "/tmp",
             "--setenv", "PYTHONDONTWRITEBYTECODE", "1", "--remount-ro", "/", "--disable-userns", "--as-pid-1", "--"]
    if os.geteuid() != 0:
        return argv + inner
    uid = sandbox_uid()
    return ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--", *argv, *inner]


def sandbox_uid() -> int:
    """A uid of its own for every sandbox started as root: the process limit (RLIMIT_NPROC counts the
    processes of a uid) then bounds each sandbox alone, and concurrent sandboxes (32 episodes of a
    rollout) neither share a budget nor can signal each other."""
    return UID_BASE + (os.getpid() * 7919 + next(_uids)) % UID_SPAN


def with_limits(argv: list[str], config: SandboxConfig) -> tuple[list[str], object]:
    """(argv, preexec_fn): the rlimits every process of the sandbox inherits, soft = hard so nothing
    inside can raise them. Set by util-linux `prlimit` when present: a preexec_fn in a process that
    runs threads (the trainer does) is not fork-safe."""
    values = _limit_values(config)
    if shutil.which("prlimit"):
        flags = {"cpu": resource.RLIMIT_CPU, "as": resource.RLIMIT_AS, "fsize": resource.RLIMIT_FSIZE,
                 "nproc": resource.RLIMIT_NPROC, "core": resource.RLIMIT_CORE}
        return ["prlimit", *(f"--{k}={values[v]}" for k, v in flags.items()), "--", *argv], None

    def apply() -> None:
        for which, value in values.items():
            resource.setrlimit(which, (value, value))
    return argv, apply


def interpreter(config: SandboxConfig) -> str:
    if config.python:
        return config.python
    own = os.path.realpath(sys.executable)
    return own if os.geteuid() != 0 or _world_reachable(own) else "/usr/bin/python3"


def _world_reachable(path: str) -> bool:
    """Can an unrelated user execute `path`? Every directory above it must be world-searchable."""
    p = Path(path)
    if not os.stat(p).st_mode & 0o001:
        return False
    return all(os.stat(d).st_mode & 0o001 for d in p.parents)


def _limit_values(config: SandboxConfig) -> dict[int, int]:
    # Not root: the sandbox runs as the caller, whose own processes count too, so the limit is
    # relative to what the caller already runs.
    procs = config.max_procs if os.geteuid() == 0 else config.max_procs + _processes_of_caller()
    return {resource.RLIMIT_CPU: config.cpu_s or int(config.timeout_s) + 1,
            resource.RLIMIT_AS: config.memory_mb << 20, resource.RLIMIT_FSIZE: config.file_size_mb << 20,
            resource.RLIMIT_NPROC: procs, resource.RLIMIT_CORE: 0}


def _processes_of_caller() -> int:
    uid = os.getuid()
    count = 0
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                count += entry.stat().st_uid == uid
            except OSError:
                pass
    return count


def execute(argv: list[str], config: SandboxConfig, stdin: bytes | None = None) -> ExecResult:
    start = time.perf_counter()
    guard = new_guard(config)
    try:
        argv, preexec = with_limits(guard.wrap(argv), config)
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=preexec,
                                start_new_session=True)
        guard.watch(proc.pid)
        out = CappedReader(proc.stdout, config.max_output_chars)
        err = CappedReader(proc.stderr, config.max_output_chars)
        if stdin is not None:
            proc.stdin.write(stdin)
            proc.stdin.close()
        timed_out = False
        try:
            wait_exit(proc, config.timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            kill_group(proc)
        code = proc.returncode
        killed_by = "timeout" if timed_out else "memory" if guard.kills() else signal_name(code)
        return ExecResult(out.text(), err.text(), code, timed_out, killed_by, time.perf_counter() - start)
    finally:
        guard.close()


def wait_exit(proc: subprocess.Popen, timeout: float) -> int:
    """`proc.wait(timeout)` without its polling: with a timeout, subprocess sleeps in doubling steps up
    to 50 ms, so an exit at 17 ms is seen at 32. Blocks on a pidfd where the kernel has them (Linux 5.3+)."""
    try:
        fd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):
        return proc.wait(timeout=timeout)
    try:
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        if not poller.poll(timeout * 1000):
            raise subprocess.TimeoutExpired(proc.args, timeout)
    finally:
        os.close(fd)
    return proc.wait()


def new_guard(config: SandboxConfig):
    """The memory guard of one execution (`memory.py`); one that cannot be set up is the machine's failure."""
    try:
        return memory_guard(config.memory_mb, config.memory_guard)
    except OSError as e:
        raise SandboxUnavailable(f"the sandbox's memory guard could not be set up: {e}") from None


def kill_group(proc: subprocess.Popen) -> None:
    """Kill the sandboxed program first, so that bwrap reaps it and exits, then anything left.

    Killing bwrap first would orphan the program; an orphan is reparented to the host's init, and
    where that init does not reap (containers), each kill leaves a zombie that counts against the
    sandbox user's process limit until forks fail."""
    for child in _children(proc.pid):
        try:
            os.kill(child, signal.SIGKILL)
        except ProcessLookupError:
            pass
    try:
        proc.wait(timeout=2.0)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()


def _children(pid: int) -> list[int]:
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except (OSError, ValueError):
        return []


def signal_name(code: int) -> str | None:
    """bwrap reports a signal death as 128 + n; a direct child as -n."""
    n = -code if code < 0 else code - 128 if code > 128 else 0
    try:
        return signal.Signals(n).name if n else None
    except ValueError:
        return None


class CappedReader:
    """Drains a pipe on a thread (a full pipe would block the program) and keeps the first `cap`
    characters, counting the rest."""

    def __init__(self, pipe, cap: int):
        self.cap, self.kept, self.dropped = cap, bytearray(), 0
        self.thread = threading.Thread(target=self._drain, args=(pipe,), daemon=True)
        self.thread.start()

    def _drain(self, pipe) -> None:
        for chunk in iter(lambda: pipe.read(65536), b""):
            room = self.cap * 4 - len(self.kept)  # bytes: utf-8 is at most 4 per character
            self.kept += chunk[: max(room, 0)]
            self.dropped += max(len(chunk) - max(room, 0), 0)
        pipe.close()

    def text(self) -> str:
        self.thread.join(timeout=2.0)
        return truncate(self.kept.decode("utf-8", "replace"), self.cap, self.dropped)


def truncate(text: str, cap: int, dropped_bytes: int = 0) -> str:
    if len(text) <= cap and not dropped_bytes:
        return text
    return text[:cap] + f"\n…[output truncated after {cap} characters]"
