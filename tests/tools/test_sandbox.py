"""Hostile programs against the sandbox: each is contained, the host is untouched, and the result is
an error result (never an exception). Network tests only ever aim at a listener on the host's own
loopback, started by the test."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from agentic_rl.cli import main
from agentic_rl.tools.sandbox import PythonSession, SandboxConfig, SandboxUnavailable, run_python
from agentic_rl.tools.sandbox.runner import wait_exit

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed (apt-get install bubblewrap)")
FAST = SandboxConfig(timeout_s=3.0)


def test_print_and_exit_codes():
    assert run_python("print(6 * 7)").stdout == "42\n"
    bad = run_python("import sys; print('x'); sys.exit(3)")
    assert (bad.stdout, bad.exit_code, bad.timed_out, bad.killed_by) == ("x\n", 3, False, None)
    syntax = run_python("def (:")
    assert syntax.exit_code == 1 and "SyntaxError" in syntax.stderr


def test_no_network_only_its_own_loopback():
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    listener.settimeout(3.0)
    port = listener.getsockname()[1]
    accepted = []
    t = threading.Thread(target=lambda: _accept(listener, accepted), daemon=True)
    t.start()
    code = f"import socket\ns = socket.socket()\ns.settimeout(2)\ns.connect(('127.0.0.1', {port}))\nprint('connected')"
    result = run_python(code, FAST)
    t.join()
    listener.close()
    assert "connected" not in result.stdout and result.exit_code != 0 and not accepted
    interfaces = run_python("print(open('/proc/net/dev').read().strip())").stdout.splitlines()[2:]
    assert [line.split(":")[0].strip() for line in interfaces] == ["lo"]


def _accept(listener, accepted):
    try:
        accepted.append(listener.accept())
    except OSError:
        pass


def test_writes_outside_its_tmp_fail_and_the_host_is_untouched(tmp_path):
    marker = f"/tmp/agentic-rl-escape-{uuid.uuid4().hex}"
    repo_file = Path(__file__).resolve().parents[2] / f"escape-{uuid.uuid4().hex}"
    targets = ["/etc/escape", "/usr/escape", str(repo_file), str(tmp_path / "escape"), "/escape"]
    code = "\n".join(f"try:\n    open({p!r}, 'w').write('x')\n    print('WROTE', {p!r})\nexcept OSError as e:\n    pass"
                     for p in targets)
    code += f"\nopen({marker!r}, 'w').write('inside')\nprint(open({marker!r}).read())"
    result = run_python(code, FAST)
    assert "WROTE" not in result.stdout and result.stdout.strip() == "inside"  # its own /tmp works
    assert not os.path.exists(marker) and not repo_file.exists() and not (tmp_path / "escape").exists()


def test_host_environment_and_home_are_invisible(monkeypatch):
    monkeypatch.setenv("AGENTIC_RL_SECRET", "hunter2")
    code = "import os\nprint(dict(os.environ))\nprint(os.path.exists(os.path.expanduser('~root')), os.listdir('/'))"
    result = run_python(code, FAST)
    assert "hunter2" not in result.stdout and "AGENTIC_RL_SECRET" not in result.stdout
    assert "/root" not in result.stdout and "'home'" not in result.stdout and "False" in result.stdout


def test_fork_bomb_is_contained():
    marker = f"fork-bomb-{uuid.uuid4().hex}"
    result = run_python(f"import os\n# {marker}\nwhile True:\n    os.fork()", SandboxConfig(timeout_s=3.0, max_procs=16))
    assert result.exit_code != 0
    assert _running_with(marker) == []  # none of its processes outlives the sandbox


def _running_with(marker: str) -> list[str]:
    """Live processes whose command line holds `marker` (a zombie runs nothing and is not counted)."""
    out = subprocess.run(["ps", "-eo", "stat=,args="], capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if marker in line and not line.strip().startswith("Z")]


def test_memory_bomb_is_stopped_by_the_address_space_limit():
    result = run_python("blocks = []\nwhile True:\n    blocks.append(bytearray(50 << 20))", SandboxConfig(memory_mb=256))
    assert result.exit_code != 0 and "MemoryError" in result.stderr and not result.timed_out


def test_cpu_loop_is_killed_by_the_clock_or_the_cpu_limit():
    by_clock = run_python("while True: pass", SandboxConfig(timeout_s=1.0))
    assert by_clock.timed_out and by_clock.killed_by == "timeout" and by_clock.duration_s < 3
    by_cpu = run_python("while True: pass", SandboxConfig(timeout_s=10.0, cpu_s=1))
    assert not by_cpu.timed_out and by_cpu.killed_by in ("SIGXCPU", "SIGKILL") and by_cpu.duration_s < 5


def test_disk_fill_is_stopped():
    code = "with open('/tmp/fill', 'wb') as f:\n    while True:\n        f.write(b'x' * (1 << 20))"
    result = run_python(code, SandboxConfig(file_size_mb=8, timeout_s=5.0))
    assert result.exit_code != 0 and not result.timed_out
    assert "File too large" in result.stderr or result.killed_by == "SIGXFSZ"


def test_killing_the_parent_kills_only_the_sandbox():
    result = run_python("import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\nos.kill(-1, signal.SIGKILL)\n"
                        "print('still here')", FAST)
    assert result.stdout == "" or "still here" in result.stdout  # whatever it managed, we are alive
    assert run_python("print('next')").stdout == "next\n"


def test_output_is_truncated_to_the_budget():
    result = run_python("print('y' * 100000)", SandboxConfig(max_output_chars=100))
    assert result.stdout.startswith("y" * 100) and "truncated" in result.stdout and len(result.stdout) < 200


def test_session_keeps_variables_and_recovers_from_a_timeout():
    with PythonSession(SandboxConfig(timeout_s=2.0)) as s:
        assert s.run("x = 20").exit_code == 0
        assert s.run("x += 1\nprint(x * 2)").stdout == "42\n"
        err = s.run("1 / 0")
        assert err.exit_code == 1 and "ZeroDivisionError" in err.stderr and "<cell>" in err.stderr
        assert s.run("print(x)").stdout == "21\n"  # an exception keeps the state
        slow = s.run("while True: pass")
        assert slow.timed_out and slow.killed_by == "timeout"
        after = s.run("print('fresh')")
        assert after.stdout == "fresh\n" and "variables are gone" in after.stderr


def test_a_cells_time_limit_does_not_count_the_interpreters_start(monkeypatch):
    """Regression: the first cell of a session (and the first after a timeout, which restarts the
    interpreter) had its deadline counted from before the interpreter started, so on a loaded machine
    `print` timed out under a 0.2 s limit. The start has its own limit; here it is made 0.3 s long."""
    start = PythonSession._start

    def slow_start(self):
        start(self)
        time.sleep(0.3)
    monkeypatch.setattr(PythonSession, "_start", slow_start)
    with PythonSession(SandboxConfig(timeout_s=0.2)) as s:
        assert s.run("print('first')").stdout == "first\n"
        assert s.run("while True: pass").timed_out
        assert s.run("print('after')").stdout == "after\n"


def test_a_cell_reading_stdin_gets_end_of_file_like_a_one_shot_run():
    """The worker's protocol arrives on its stdin; a cell's `input()` must not block on it (a hang
    until the wall clock, the session's state lost) nor read a protocol line: it gets end-of-file at
    once, as `run_python` (stdin /dev/null) does."""
    assert "EOFError" in run_python("input('?')", FAST).stderr
    with PythonSession(SandboxConfig(timeout_s=2.0)) as s:
        s.run("keep = 3")
        cell = s.run("input('number: ')")
        assert cell.exit_code == 1 and "EOFError" in cell.stderr and not cell.timed_out
        assert s.run("import sys, os\nprint(repr(sys.stdin.read()), repr(os.read(0, 10)))").stdout == "'' b''\n"
        assert s.run("print(keep)").stdout == "3\n"  # the worker was not restarted


def test_session_survives_a_memory_bomb():
    with PythonSession(SandboxConfig(memory_mb=256)) as s:
        s.run("keep = 7")
        bomb = s.run("b = bytearray(1 << 30)")
        assert bomb.exit_code == 1 and "MemoryError" in bomb.stderr
        assert s.run("print(keep)").stdout == "7\n"


def test_cli_prints_one_json_object(tmp_path, capsys):
    script = tmp_path / "p.py"
    script.write_text("print('hi')\nimport time\ntime.sleep(5)")
    assert main(["sandbox", str(script), "--timeout", "1"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["stdout"] == "hi\n" and out["timed_out"] and out["killed_by"] == "timeout"
    assert set(out) >= {"stdout", "stderr", "exit_code", "timed_out", "killed_by"}


def test_missing_bwrap_is_a_clear_error_and_the_fallback_is_opt_in():
    with pytest.raises(SandboxUnavailable, match="apt-get install bubblewrap"):
        run_python("print(1)", SandboxConfig(bwrap="/nonexistent/bwrap"))
    with pytest.warns(RuntimeWarning, match="WITHOUT the sandbox"):
        result = run_python("print(1)", SandboxConfig(bwrap="/nonexistent/bwrap", allow_unsandboxed=True,
                                                      python=sys.executable))
    assert result.stdout == "1\n"


def test_back_to_back_runs_leave_nothing_behind():
    """Regression: without `--as-pid-1`, bwrap's PID-1 reaper outlived each run as a zombie owned by
    the sandbox user; where the host's init does not reap (containers), 32 runs later every fork of
    that user failed. 40 runs under an 8-process limit must all work."""
    config = SandboxConfig(max_procs=8)
    assert all(run_python("print(1)", config).stdout == "1\n" for _ in range(40))


def test_repeated_timeouts_leave_nothing_behind():
    """Regression: killing bwrap before its child orphaned the child (a zombie where init does not
    reap); 32 timeouts later the sandbox user could not fork. The program is now killed first."""
    config = SandboxConfig(timeout_s=0.2, max_procs=8)
    results = [run_python("while True: pass", config) for _ in range(12)]
    assert all(r.timed_out for r in results)
    with PythonSession(config) as s:
        assert all(s.run("while True: pass").timed_out for _ in range(12))
        assert s.run("print('alive')").stdout == "alive\n"
    # the same process limit, the default time limit: what is checked is that the user can still fork,
    # not that Python starts within 0.2 s on a loaded machine (it did not, once, beside three other jobs)
    assert run_python("print(1)", SandboxConfig(max_procs=8)).stdout == "1\n"


def test_many_concurrent_sessions_each_have_their_own_process_budget():
    """A rollout batch holds one interpreter per episode. With one shared uid, 32 episodes exhausted
    the process limit and later sandboxes could not start; each sandbox now has a uid of its own."""
    sessions = [PythonSession(SandboxConfig(max_procs=4)) for _ in range(40)]
    try:
        assert all(s.run(f"print({i})").stdout == f"{i}\n" for i, s in enumerate(sessions))
    finally:
        for s in sessions:
            s.close()


def test_the_wait_blocks_on_the_exit_instead_of_polling(monkeypatch):
    # subprocess's own wait(timeout) polls in doubling sleeps up to 50 ms, so an exit at 17 ms is seen
    # at 32 (a third of a one-shot run's cost); the wait must block on the exit and never sleep
    def no_polling(_):
        raise AssertionError("the wait polled")
    monkeypatch.setattr(time, "sleep", no_polling)
    proc = subprocess.Popen(["/bin/sh", "-c", "read x; exit 3"], stdin=subprocess.PIPE)
    threading.Timer(0.05, proc.stdin.close).start()
    assert wait_exit(proc, 5.0) == 3
    proc = subprocess.Popen(["/bin/sh", "-c", "read x"], stdin=subprocess.PIPE)
    with pytest.raises(subprocess.TimeoutExpired):
        wait_exit(proc, 0.2)
    proc.stdin.close()
    monkeypatch.undo()
    proc.wait()
