"""A stateful sandboxed interpreter: variables survive between code cells of one episode (ReTool).

One worker process per session, started in the same bubblewrap sandbox and rlimits as `run_python`,
reads cells as JSON lines and answers each with its captured output. A cell that exceeds the wall
clock kills the worker (a Python thread cannot be interrupted reliably); so does a limit the kernel
enforces. Either way the result says so, and the next cell starts a fresh worker whose lost state is
announced in its stderr, so the model knows to recompute.
"""

from __future__ import annotations

import dataclasses
import json
import os
import select
import subprocess
import time

from agentic_rl.tools.sandbox.runner import (
    ExecResult,
    SandboxConfig,
    SandboxUnavailable,
    command,
    kill_group,
    new_guard,
    signal_name,
    truncate,
    with_limits,
)

# Runs inside the sandbox (stdlib only). The protocol uses private copies of fds 0 and 1; fds 0, 1
# and 2 then point at /dev/null, so output written around Python's sys.stdout cannot corrupt it and
# a cell that reads stdin (`input()`) gets end-of-file at once, as in a one-shot run, instead of
# blocking on the protocol pipe until the wall clock kills the worker.
WORKER = r"""
import io, json, os, sys, traceback
proto_in, proto_out = os.fdopen(os.dup(0), "r"), os.fdopen(os.dup(1), "w")
os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
null = os.open(os.devnull, os.O_WRONLY)
os.dup2(null, 1)
os.dup2(null, 2)
sys.stdin = open(os.devnull)
CAP = int(sys.argv[1])

class Capped(io.TextIOBase):
    def __init__(self):
        self.parts, self.n = [], 0
    def writable(self):
        return True
    def write(self, text):
        if self.n < CAP:
            self.parts.append(text[: CAP - self.n])
        self.n += len(text)
        return len(text)
    def value(self):
        return "".join(self.parts), self.n > CAP

env = {"__name__": "__main__"}
proto_out.write('{"ready": true}\n')
proto_out.flush()
for line in proto_in:
    cell = json.loads(line)["code"]
    out, err = Capped(), Capped()
    sys.stdout, sys.stderr = out, err
    code = 0
    try:
        exec(compile(cell, "<cell>", "exec"), env)
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    except BaseException as e:
        code = 1
        traceback.print_exception(type(e), e, e.__traceback__.tb_next)  # from the cell down
    sys.stdout, sys.stderr = sys.__stdout__, sys.__stderr__
    (o, o_cut), (e, e_cut) = out.value(), err.value()
    proto_out.write(json.dumps({"stdout": o, "stderr": e, "cut": [o_cut, e_cut], "code": code}) + "\n")
    proto_out.flush()
"""
CPU_CELLS = 8  # RLIMIT_CPU is per process lifetime: a session's worker gets this many cells' worth
START_S = 10.0  # a worker not ready by then did not start


class PythonSession:
    def __init__(self, config: SandboxConfig | None = None):
        config = config or SandboxConfig()
        cpu = (config.cpu_s or int(config.timeout_s) + 1) * CPU_CELLS
        self.config = dataclasses.replace(config, cpu_s=cpu)
        self.proc: subprocess.Popen | None = None
        self.guard = None  # the worker's memory guard (`memory.py`): the session's limit as a whole
        self._kills = 0  # the guard's count of processes killed for memory, after the last cell
        self._buffer = b""
        self._lost = ""  # why the previous worker's variables are gone, told with the next result

    def run(self, code: str) -> ExecResult:
        start = time.perf_counter()
        if self.proc is None:
            self._start()
        try:
            self.proc.stdin.write((json.dumps({"code": code}) + "\n").encode())
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            return self._died(start)
        line = self._read_line(time.perf_counter() + self.config.timeout_s)  # the cell's time, not the start's
        if line is None:
            timed_out = self.proc.poll() is None
            if timed_out:
                self.close()
                self._lost = "the previous cell ran out of time, so the interpreter was restarted"
                return ExecResult("", f"Error: the cell ran longer than {self.config.timeout_s:g}s and was stopped",
                                  -9, True, "timeout", time.perf_counter() - start)
            return self._died(start)
        reply = json.loads(line)
        notice, self._lost = (f"[note: {self._lost}; earlier variables are gone]\n" if self._lost else ""), ""
        cap = self.config.max_output_chars
        kills, self._kills = self._kills, self.guard.kills()
        killed = "memory" if self._kills > kills else None  # a child of the cell, the worker lived
        return ExecResult(truncate(reply["stdout"], cap, reply["cut"][0]), notice + truncate(reply["stderr"], cap,
                          reply["cut"][1]), int(reply["code"]), False, killed, time.perf_counter() - start)

    def close(self) -> None:
        if self.proc is not None:
            kill_group(self.proc)
            for pipe in (self.proc.stdin, self.proc.stdout):
                try:
                    pipe.close()
                except OSError:  # a dead worker's stdin cannot be flushed
                    pass
            self.proc, self._buffer = None, b""
        if self.guard is not None:
            self.guard.close()
            self.guard = None

    def __enter__(self) -> PythonSession:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _start(self) -> None:
        """A worker that has said it is ready; one that cannot start, or does not say so within
        `START_S`, is the machine's failure (`SandboxUnavailable`), not the code's: no cell ran yet."""
        self.guard = new_guard(self.config)
        argv, preexec = with_limits(self.guard.wrap(command(self.config, ["-c", WORKER,
                                                                          str(self.config.max_output_chars)])),
                                    self.config)
        try:
            self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=subprocess.DEVNULL, preexec_fn=preexec, start_new_session=True)
        except OSError as e:
            self.guard.close()
            self.guard = None
            raise SandboxUnavailable(f"the sandbox could not start: {e}") from None
        self.guard.watch(self.proc.pid)
        self._kills = self.guard.kills()
        ready = self._read_line(time.perf_counter() + START_S)
        if ready != b'{"ready": true}':
            code = self.proc.poll()
            self.close()
            raise SandboxUnavailable(f"the sandbox did not start (worker {'exit code ' + str(code) if code is not None else 'silent'})")

    def _read_line(self, deadline: float) -> bytes | None:
        fd = self.proc.stdout.fileno()
        while b"\n" not in self._buffer:
            left = deadline - time.perf_counter()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                return None
            chunk = os.read(fd, 65536)
            if not chunk:
                return None
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return line

    def _died(self, start: float) -> ExecResult:
        """The worker ended by itself mid-cell: a kernel limit (CPU, memory, processes) or os._exit."""
        code = self.proc.wait()
        name = "memory" if self.guard.kills() else signal_name(code)
        self.close()
        self._lost = f"the interpreter died ({name or f'exit code {code}'})"
        return ExecResult("", f"Error: {self._lost}; its variables are gone", code, False, name,
                          time.perf_counter() - start)
