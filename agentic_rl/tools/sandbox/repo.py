"""A repository session: one episode's copy of a repository, in the sandbox, with file and test
operations on it.

The copy lives in a size-capped tmpfs of the session's own sandbox (bubblewrap, no network, the
memory guard and rlimits of `runner.py`; `repo_worker.py` is the process inside), so concurrent
episodes cost one small sandbox each and nothing of the copy ever touches the host's disk. The host
sends the files at the start; what the episode does to them dies with the sandbox.

Every operation is a JSON round trip with a deadline. A worker that misses it (a pathological
search pattern) or dies (a memory kill) is replaced by a fresh one rebuilt from the files and the
edits that applied so far, and the operation answers an error that says so: a broken episode is an
observation, never an exception of the run.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import os
import re
import select
import shlex
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from agentic_rl.tools.sandbox.repo_worker import PRIVATE, ROOT
from agentic_rl.tools.sandbox.runner import (
    SandboxConfig,
    SandboxUnavailable,
    command,
    interpreter,
    kill_group,
    new_guard,
    with_limits,
)

_HERE = Path(__file__).parent
PASSING = ("passed", "xfailed")  # SWE-bench's reading: PASSED and XFAIL count as passing
START_S = 10.0


@dataclass(frozen=True)
class RepoConfig:
    """sandbox.timeout_s is the wall clock of one test run; per_test_s each test's own limit."""

    sandbox: SandboxConfig = SandboxConfig(timeout_s=30.0, memory_mb=1024, max_procs=64, cpu_s=3600,
                                           max_output_chars=100_000)
    repo_size_mb: int = 64  # the tmpfs holding the copy (and whatever the tests write into it)
    per_test_s: float = 5.0
    op_timeout_s: float = 10.0  # a file operation


class RepoError(Exception):
    """An operation the episode asked for failed (the message is meant for the model)."""


@dataclass(frozen=True)
class TestRun:
    """One run: `results` maps node ids to {"outcome", "error", "where", "line", "call", ...}."""

    __test__ = False  # not a test class, whatever its name says to pytest

    results: Mapping[str, Mapping] = field(default_factory=dict)
    status: str = "ok"  # "ok", "timeout", "killed by SIGXFSZ", "exit code 2", ...
    output: str = ""
    seconds: float = 0.0

    def passed(self, node: str) -> bool:
        return self.results.get(node, {}).get("outcome") in PASSING


@dataclass(frozen=True)
class ShellRun:
    """One shell command: its output (stdout and stderr), exit code, and "ok" or "timeout"."""

    output: str
    returncode: int
    status: str = "ok"
    seconds: float = 0.0


# ----------------------------------------------------------------------------- log parsers
def parse_pytest(output: str) -> dict[str, dict]:
    """pytest's `-rA` summary lines: `PASSED tests/test_x.py::test_y` (SWE-bench's pytest parser)."""
    outcomes = {"PASSED": "passed", "FAILED": "failed", "ERROR": "error", "SKIPPED": "skipped",
                "XFAIL": "xfailed", "XPASS": "xpassed"}
    out = {}
    for line in output.splitlines():
        word, _, rest = line.strip().partition(" ")
        if word in outcomes and rest:
            out[rest.split(" - ")[0].strip()] = {"outcome": outcomes[word]}
    return out


_UNITTEST = re.compile(r"^(\w+) \(([\w.]+)\)(?: \.\.\.|\n.*?\.\.\.) (ok|FAIL|ERROR|skipped.*|expected failure|unexpected success)$",
                       re.MULTILINE)


def parse_unittest(output: str) -> dict[str, dict]:
    """`python -m unittest -v` lines: `test_y (pkg.tests.TestX.test_y) ... ok`; ids are dotted."""
    outcomes = {"ok": "passed", "FAIL": "failed", "ERROR": "error", "expected failure": "xfailed",
                "unexpected success": "failed"}
    out = {}
    for name, dotted, word in _UNITTEST.findall(output):
        node = dotted if dotted.endswith("." + name) else f"{dotted}.{name}"
        out[node] = {"outcome": "skipped" if word.startswith("skipped") else outcomes[word]}
    return out


LOG_PARSERS: dict[str, Callable[[str], dict[str, dict]]] = {"pytest": parse_pytest, "unittest": parse_unittest}


@dataclass(frozen=True)
class TestCommand:
    """A repository's own test command, e.g. "python -m pytest -rA {tests}" with log_parser "pytest":
    run in the repository inside the sandbox ("python" is the sandbox's interpreter), its output
    read by `LOG_PARSERS[log_parser]`. None (the default everywhere) runs the built-in runner."""

    __test__ = False

    command: str
    log_parser: str = "pytest"

    def __post_init__(self) -> None:
        if self.log_parser not in LOG_PARSERS:
            raise KeyError(f"unknown log_parser {self.log_parser!r}; known: {', '.join(sorted(LOG_PARSERS))}")

    def argv(self, python: str, selectors: Sequence[str]) -> list[str]:
        words = shlex.split(self.command)
        tests = [s for s in selectors]
        argv = [w2 for w in words for w2 in (tests if w == "{tests}" else [w])]
        return [python if i == 0 and w in ("python", "python3") else w for i, w in enumerate(argv)]


# ----------------------------------------------------------------------------- the session
class RepoSession:
    """One episode's repository in the sandbox; `files` maps paths to text (or bytes)."""

    def __init__(self, files: Mapping[str, str | bytes], config: RepoConfig | None = None,
                 python_path: Sequence[str] = (".",), test_command: TestCommand | None = None):
        self.config = config or RepoConfig()
        self.python_path, self.test_command = tuple(python_path), test_command
        self._files = {k: _encode(v) for k, v in files.items()}
        self._edits: list[tuple[str, str, str]] = []  # the edits that applied, for a rebuild
        self.proc: subprocess.Popen | None = None
        self.guard = None
        self._buffer = b""
        self.sandbox_seconds = 0.0  # wall time spent waiting on the sandbox (start, operations, tests)
        self._start()

    # -------------------------------------------------------------- operations
    def list_files(self, path: str = ".") -> list[str]:
        return self._op({"op": "list", "path": path})["files"]

    def read(self, path: str, start: int = 1, end: int | None = None) -> dict:
        return self._op({"op": "read", "path": path, "start": start, "end": end})

    def search(self, pattern: str, path: str = ".", regex: bool = False, max_hits: int = 200) -> dict:
        return self._op({"op": "search", "pattern": pattern, "path": path, "regex": regex, "max_hits": max_hits})

    def edit(self, path: str, old: str, new: str) -> dict:
        reply = self._op({"op": "edit", "path": path, "old": old, "new": new})
        self._edits.append((path, old, new))
        return reply

    def shell(self, command: str, timeout_s: float | None = None, env: Mapping[str, str] | None = None) -> ShellRun:
        """`command` run by bash in the repository's root, inside the sandbox (a fresh shell each time:
        no state but the files carries over), with `env` over the sandbox's variables. A worker rebuilt
        after a crash replays only `edit`s."""
        box = self.config.sandbox
        timeout = box.timeout_s if timeout_s is None else timeout_s
        req = {"op": "shell", "command": command, "timeout_s": timeout, "python_path": list(self.python_path),
               "max_output": box.max_output_chars, "env": dict(env or {})}
        reply = self._op(req, timeout + 10.0)
        return ShellRun(reply["output"], reply["returncode"], reply["status"], reply["seconds"])

    def snapshot(self) -> dict[str, str | bytes]:
        """The repository's files as they are now: {path: text, or bytes when not UTF-8}."""
        files = self._op({"op": "snapshot"})["files"]
        return {p: base64.b64decode(v["b64"]) if isinstance(v, dict) else v for p, v in files.items()}

    def run_tests(self, selectors: Sequence[str] = ()) -> TestRun:
        box = self.config.sandbox
        req = {"op": "test", "timeout_s": box.timeout_s, "python_path": list(self.python_path),
               "max_output": box.max_output_chars, "argv": None,
               "runner": {"selectors": list(selectors), "python_path": list(self.python_path),
                          "per_test_s": self.config.per_test_s, "shim": f"{PRIVATE}/shim"}}
        if self.test_command is not None:
            req["argv"] = self.test_command.argv(interpreter(box), selectors)
        reply = self._op(req, box.timeout_s + 10.0)
        if self.test_command is not None:
            results = LOG_PARSERS[self.test_command.log_parser](reply["output"])
        else:
            results = {r["id"]: r for r in reply["results"] if "id" in r}
        return TestRun(results, reply["status"], reply["output"], reply["seconds"])

    def close(self) -> None:
        if self.proc is not None:
            kill_group(self.proc)
            for pipe in (self.proc.stdin, self.proc.stdout):
                try:
                    pipe.close()
                except OSError:
                    pass
            self.proc, self._buffer = None, b""
        if self.guard is not None:
            self.guard.close()
            self.guard = None

    def __enter__(self) -> RepoSession:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -------------------------------------------------------------- plumbing
    def _op(self, req: dict, timeout: float | None = None) -> dict:
        if self.proc is None:
            raise RepoError("the session is closed")
        start = time.perf_counter()
        try:
            reply = self._round_trip(req, timeout or self.config.op_timeout_s)
        finally:
            self.sandbox_seconds += time.perf_counter() - start
        if reply is None:
            why = "took too long" if self.proc.poll() is None else "ended the sandbox"
            self._rebuild()
            raise RepoError(f"the {req['op']} operation {why}; the repository was rebuilt from your edits")
        if "error" in reply:
            raise RepoError(reply["error"])
        return reply

    def _round_trip(self, req: dict, timeout: float) -> dict | None:
        try:
            self.proc.stdin.write((json.dumps(req) + "\n").encode())
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            return None
        line = self._read_line(time.perf_counter() + timeout)
        try:
            return json.loads(line) if line is not None else None
        except ValueError:
            return None

    def _start(self) -> None:
        box = self.config.sandbox
        self.guard = new_guard(box)
        mounts = ["--size", str(self.config.repo_size_mb << 20), "--tmpfs", ROOT]
        argv = command(box, ["-c", _source("repo_worker.py")], mounts=mounts)
        argv, preexec = with_limits(self.guard.wrap(argv), box)
        t0 = time.perf_counter()
        try:
            self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                         preexec_fn=preexec, start_new_session=True)
        except OSError as e:
            self.close()
            raise SandboxUnavailable(f"the sandbox could not start: {e}") from None
        self.guard.watch(self.proc.pid)
        ready = self._read_line(time.perf_counter() + START_S)
        setup = ready == b'{"ready": true}' and self._round_trip(
            {"op": "setup", "files": self._files, "private": _PRIVATE}, START_S + len(self._files) / 100)
        self.sandbox_seconds += time.perf_counter() - t0
        if not setup or "error" in setup:
            code = self.proc.poll()
            self.close()
            raise SandboxUnavailable(f"the repository sandbox did not start ({setup or f'worker exit code {code}'})")

    def _rebuild(self) -> None:
        self.close()
        self._start()
        edits, self._edits = self._edits, []
        for path, old, new in edits:
            try:
                self.edit(path, old, new)
            except RepoError:
                pass

    def _read_line(self, deadline: float) -> bytes | None:
        fd = self.proc.stdout.fileno()
        while b"\n" not in self._buffer:
            left = deadline - time.perf_counter()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                return None
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                return None
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return line


def _encode(content: str | bytes):
    if isinstance(content, str):
        return content
    try:
        return content.decode("utf-8")
    except UnicodeDecodeError:
        return {"b64": base64.b64encode(content).decode("ascii")}


def _source(name: str) -> str:
    return (_HERE / name).read_text(encoding="utf-8")


_PRIVATE = {"runner.py": _source("repo_runner.py"), "shim/pytest.py": _source("repo_pytest.py")}


def read_tree(root: str | Path, skip: Sequence[str] = ()) -> dict[str, bytes]:
    """A directory's regular files as {relative path: bytes} (symlinks are not followed: a snapshot's
    link to elsewhere would copy the host's file into the sandbox); `skip`: names left out anywhere."""
    root, out = Path(root), {}
    for base, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in {*skip, ".git", "__pycache__"} and not os.path.islink(os.path.join(base, d)))
        for name in sorted(files):
            full = Path(base) / name
            if name not in skip and not full.is_symlink() and full.is_file():
                out[full.relative_to(root).as_posix()] = full.read_bytes()
    return out


def replaced(config: RepoConfig, **sandbox) -> RepoConfig:
    """`config` with some sandbox fields changed (timeout_s, memory_mb, ...)."""
    return dataclasses.replace(config, sandbox=dataclasses.replace(config.sandbox, **sandbox))
