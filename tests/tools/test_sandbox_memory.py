"""The sandbox's memory limit bounds an execution as a whole: every process of it and every RAM-backed
filesystem it can write, under either guard (`agentic_rl/tools/sandbox/memory.py`).

The hostile programs are the two escapes of a per-process RLIMIT_AS: several children each just under
the limit, and files written into a RAM-backed filesystem. Each program states what it managed, so a
test reads the outcome from the program's own account, and a control run with a larger limit shows the
program does hold that much when allowed to.
"""

from __future__ import annotations

import json
import os
import shutil

import pytest

from agentic_rl.cli import main
from agentic_rl.tools.sandbox import PythonSession, SandboxConfig, run_python
from agentic_rl.tools.sandbox.memory import memory_cgroup_parent

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed (apt-get install bubblewrap)")

GUARDS = [pytest.param("cgroup", marks=pytest.mark.skipif(memory_cgroup_parent() is None,
                                                          reason="no memory cgroup can be created here")),
          "supervisor"]

# Four children each fill 60 MiB (one process stays under a 128 MiB RLIMIT_AS; together they hold
# 240 MiB), tell the parent, and wait; the parent says "all alive" only if all four held at once.
FORK = """
import os, time
r, w = os.pipe()
kids = []
for _ in range(4):
    pid = os.fork()
    if pid == 0:
        os.close(r)
        block = b"\\x01" * (60 << 20)
        os.write(w, b"k")
        time.sleep(2)
        os._exit(0)
    kids.append(pid)
os.close(w)
got = b""
while len(got) < 4:
    c = os.read(r, 1)
    if not c:
        break
    got += c
alive = all(os.waitpid(k, os.WNOHANG) == (0, 0) for k in kids)
print("all alive" if len(got) == 4 and alive else f"held {len(got)}, alive {alive}", flush=True)
for k in kids:
    try:
        os.waitpid(k, 0)
    except ChildProcessError:
        pass
"""

# Writes 4 MiB files (under the 16 MiB per-file limit) into a directory until 200 MiB or an error.
FILL = """
written = 0
try:
    for i in range(50):
        with open(f"{DIR}/f{i}", "wb") as f:
            f.write(b"\\x01" * (4 << 20))
        written += 4
    print(DIR, written, "ok", flush=True)
except OSError as e:
    print(DIR, written, e.strerror, flush=True)
"""


def fill(directory: str) -> str:
    return f"DIR = {directory!r}\n" + FILL


@pytest.mark.parametrize("guard", GUARDS)
def test_children_together_cannot_hold_more_than_the_limit(guard):
    allowed = run_python(FORK, SandboxConfig(memory_mb=512, memory_guard=guard, timeout_s=20))
    assert allowed.stdout.strip() == "all alive" and allowed.killed_by is None, allowed
    limited = run_python(FORK, SandboxConfig(memory_mb=128, memory_guard=guard, timeout_s=20))
    assert "all alive" not in limited.stdout, limited
    assert limited.killed_by == "memory", limited


@pytest.mark.parametrize("guard", GUARDS)
def test_dev_is_read_only_and_dev_shm_is_sized(guard):
    config = SandboxConfig(memory_mb=256, memory_guard=guard, shm_size_mb=16, timeout_s=20)
    dev = run_python(fill("/dev"), config)
    assert dev.stdout.split() == ["/dev", "0", "Read-only", "file", "system"], dev
    shm = run_python(fill("/dev/shm"), config)
    assert shm.stdout.split()[:2] == ["/dev/shm", "16"] and "No space left" in shm.stdout, shm


@pytest.mark.parametrize("guard", GUARDS)
def test_files_in_tmp_count_within_the_limit(guard):
    # /tmp may hold 256 MiB by its size, but the execution may hold 128 MiB in all
    result = run_python(fill("/tmp"), SandboxConfig(memory_mb=128, tmp_size_mb=256, memory_guard=guard,
                                                    timeout_s=20))
    assert "ok" not in result.stdout and result.killed_by == "memory", result
    control = run_python(fill("/tmp"), SandboxConfig(memory_mb=512, tmp_size_mb=256, memory_guard=guard,
                                                     timeout_s=20))
    assert control.stdout.split() == ["/tmp", "200", "ok"], control


@pytest.mark.parametrize("guard", GUARDS)
def test_a_session_cell_over_the_limit_is_stopped_and_the_next_cell_runs(guard):
    with PythonSession(SandboxConfig(memory_mb=128, memory_guard=guard, timeout_s=20)) as session:
        result = session.run(FORK)
        assert "all alive" not in result.stdout and result.killed_by == "memory", result
        after = session.run("print(6 * 7)")
        assert after.stdout.strip() == "42" and after.killed_by is None, after


@pytest.mark.skipif(memory_cgroup_parent() is None, reason="no memory cgroup can be created here")
def test_each_execution_removes_its_cgroup():
    def ours() -> list[str]:
        return [p.name for p in memory_cgroup_parent().iterdir()
                if p.name.startswith(f"agentic-rl-sandbox-{os.getpid()}-")]
    run_python("print(1)", SandboxConfig(memory_guard="cgroup"))
    run_python(FORK, SandboxConfig(memory_mb=128, memory_guard="cgroup", timeout_s=20))
    run_python("while True: pass", SandboxConfig(memory_guard="cgroup", timeout_s=0.5))
    with PythonSession(SandboxConfig(memory_guard="cgroup")) as session:
        session.run("x = 1")
        assert len(ours()) == 1  # the session's own, while it lives
    assert ours() == []


@pytest.mark.parametrize("guard", GUARDS)
def test_cli_holds_the_limit_under_the_chosen_guard(guard, tmp_path, capsys):
    script = tmp_path / "fork.py"
    script.write_text(FORK)
    assert main(["sandbox", str(script), "--memory-mb", "128", "--memory-guard", guard, "--timeout", "20"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert "all alive" not in out["stdout"] and out["killed_by"] == "memory", out
