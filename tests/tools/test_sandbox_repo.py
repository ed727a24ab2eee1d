"""Repository sessions (`tools/sandbox/repo.py`): the runner against real pytest, the file
operations, and code under test that attacks the session — each contained, the host untouched."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from agentic_rl.tools.sandbox.repo import (
    RepoConfig,
    RepoError,
    RepoSession,
    TestCommand,
    parse_pytest,
    parse_unittest,
    read_tree,
)

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")
PROJECTS = Path(__file__).parents[2] / "agentic_rl" / "data" / "swe_projects"
CALC = "def add(a, b):\n    return a + b\n"


def _repo(test_body: str) -> dict[str, str]:
    return {"calc/__init__.py": CALC, "tests/test_calc.py": "from calc import add\n\n" + test_body}


def test_runner_gives_pytests_node_ids_and_outcomes(tmp_path):
    """Our stdlib runner against pytest itself on a real suite (parametrize over objects, fixtures,
    raises, unittest classes): the same ids, the same outcomes. A fault planted in the copy makes
    the same tests fail under both."""
    project = tmp_path / "isodate"
    shutil.copytree(PROJECTS / "isodate", project)
    target = project / "src/isodate/isodates.py"
    target.write_text(target.read_text().replace('days=int(groups["day"]) - 1', 'days=int(groups["day"])', 1))
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider", "tests/test_date.py"], cwd=project,
                         capture_output=True, text=True, env={**os.environ, "PYTHONPATH": "src", "PYTHONHASHSEED": "0", "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"},
                         timeout=300).stdout
    theirs = {k: v["outcome"] for k, v in parse_pytest(out).items()}
    with RepoSession(read_tree(project, skip=("project.json",)), python_path=["src"]) as s:
        ours = {k: v["outcome"] for k, v in s.run_tests(["tests/test_date.py"]).results.items()}
    assert len(theirs) > 50 and "failed" in theirs.values()
    assert ours == theirs


def test_failures_say_what_was_called_expected_and_got():
    body = ("import unittest\n\nclass T(unittest.TestCase):\n    def test_eq(self):\n        self.assertEqual(add(2, 2), 5)\n\n"
            "def test_plain():\n    assert add(1, 2) == 4\n\ndef test_raise():\n    add(1, None)\n")
    with RepoSession(_repo(body)) as s:
        r = s.run_tests().results
    assert (r["tests/test_calc.py::T::test_eq"]["call"], r["tests/test_calc.py::T::test_eq"]["got"],
            r["tests/test_calc.py::T::test_eq"]["expected"]) == ("add(2, 2)", "4", "5")
    assert (r["tests/test_calc.py::test_plain"]["got"], r["tests/test_calc.py::test_plain"]["expected"]) == ("3", "4")
    assert r["tests/test_calc.py::test_raise"]["raised"] == "TypeError" and r["tests/test_calc.py::test_raise"]["outcome"] == "error"


def test_file_operations_and_paths_outside_the_repository():
    with RepoSession(_repo("def test_a():\n    assert add(1, 1) == 2\n")) as s:
        assert s.list_files() == ["calc/__init__.py", "tests/test_calc.py"]
        assert s.read("calc/__init__.py", 2, 2)["lines"] == ["    return a + b"]
        assert s.search("return")["hits"] == [["calc/__init__.py", 2, "    return a + b"]]
        with pytest.raises(RepoError, match="pattern is empty"):
            s.search("")
        for bad in ("../etc/passwd", "/etc/passwd", "calc/../../x", "/repo/../etc"):
            with pytest.raises(RepoError, match="outside the repository"):
                s.read(bad)
        with pytest.raises(RepoError, match="occurs 3 times"):
            s.edit("calc/__init__.py", "a", "c")
        with pytest.raises(RepoError, match="not found"):
            s.edit("calc/__init__.py", "return a * b", "x")
        assert s.edit("/repo/calc/__init__.py", "a + b", "a - b")["line"] == 2
        assert s.run_tests(["tests/test_calc.py::test_a"]).results["tests/test_calc.py::test_a"]["outcome"] == "failed"


def test_planted_symlink_fork_hang_and_deletion_are_contained(tmp_path):
    """A test plants a symlink to a host file (the host's own path: invisible inside), forks a
    daemon, hangs, writes into the worker's pipe; the next run finds the daemon gone; then the
    tests delete the whole repository: the session answers, and the host file is untouched."""
    canary = tmp_path / f"canary-{uuid.uuid4().hex}"
    canary.write_text("secret")
    body = (f"import os, subprocess, time\n\ndef test_plant():\n    os.symlink({str(canary)!r}, 'leak')\n    os.symlink('/', 'root')\n"
            "    p = subprocess.Popen(['sleep', '600'], start_new_session=True)\n    open('pid', 'w').write(str(p.pid))\n"
            "    for fd in ('/proc/1/fd/1', '/proc/1/fd/0'):\n        try:\n            open(fd, 'w').write('garbage\\n')\n"
            "        except OSError:\n            pass\n\ndef test_hang():\n    while True:\n        pass\n\n"
            "def test_after():\n    assert add(1, 1) == 2\n")
    config = RepoConfig(per_test_s=1.0)
    with RepoSession(_repo(body), config) as s:
        first = s.run_tests().results
        assert first["tests/test_calc.py::test_plant"]["outcome"] == "passed"
        assert first["tests/test_calc.py::test_hang"]["outcome"] == "failed" and "time limit" in first["tests/test_calc.py::test_hang"]["error"]
        assert first["tests/test_calc.py::test_after"]["outcome"] == "passed"
        for link in ("leak", "root"):
            with pytest.raises(RepoError, match="outside the repository"):
                s.read(link)
        assert "root" not in str(s.list_files())
        pid = s.read("pid")["lines"][0]
        s.edit("tests/test_calc.py", "def test_after():", f"def test_gone():\n    import os, pytest\n    with pytest.raises(ProcessLookupError):\n"
               f"        os.kill({pid}, 0)\n\ndef test_delete():\n    import shutil\n    shutil.rmtree('/repo', ignore_errors=True)\n\ndef test_after():")
        second = s.run_tests(["tests/test_calc.py::test_gone", "tests/test_calc.py::test_delete"]).results
        assert [second[k]["outcome"] for k in sorted(second)] == ["passed", "passed"], second
        assert s.list_files() == []
        assert s.run_tests().results == {}  # nothing left to run, and no exception
    assert canary.read_text() == "secret"


def test_fork_bomb_is_stopped_and_the_session_goes_on():
    body = "import os\n\ndef test_bomb():\n    while True:\n        os.fork()\n\ndef test_after():\n    assert add(2, 2) == 4\n"
    with RepoSession(_repo(body), RepoConfig(per_test_s=2.0)) as s:
        r = s.run_tests(["tests/test_calc.py::test_bomb"])
        assert r.results["tests/test_calc.py::test_bomb"]["outcome"] in ("error", "failed") or r.status != "ok"
        assert s.run_tests(["tests/test_calc.py::test_after"]).passed("tests/test_calc.py::test_after")


def test_a_hung_operation_rebuilds_the_repository_with_its_edits():
    """A search the worker cannot finish in time costs the worker: a fresh one holds the files and
    the edits that had applied."""
    files = {"a.py": "x = 1\n", "big.txt": "a" * 30 + "!\n"}
    with RepoSession(files, RepoConfig(op_timeout_s=1.0)) as s:
        s.edit("a.py", "x = 1", "x = 2")
        with pytest.raises(RepoError, match="took too long; the repository was rebuilt"):
            s.search("(a+)+$", regex=True)
        assert s.read("a.py")["lines"] == ["x = 2"]


def test_a_repository_test_command_and_its_log_parser(tmp_path):
    """`python -m unittest -v` in the sandbox, read by the unittest parser; the parser against the
    host's own unittest output of the same suite."""
    files = {"calc/__init__.py": CALC.replace("a + b", "a - b"), "tests/__init__.py": "",
             "tests/test_calc.py": "import unittest\nfrom calc import add\n\nclass T(unittest.TestCase):\n"
             "    def test_add(self):\n        self.assertEqual(add(2, 2), 4)\n    def test_zero(self):\n"
             "        self.assertEqual(add(0, 0), 0)\n"}
    command = TestCommand("python -m unittest -v {tests}", "unittest")
    with RepoSession(files, test_command=command) as s:
        run = s.run_tests(["tests.test_calc"])
    assert {k: v["outcome"] for k, v in run.results.items()} == {
        "tests.test_calc.T.test_add": "failed", "tests.test_calc.T.test_zero": "passed"}
    for path, text in files.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text)
    host = subprocess.run([sys.executable, "-m", "unittest", "-v", "tests.test_calc"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=60).stderr
    assert parse_unittest(host) == run.results


def test_shell_commands_run_in_the_copy_and_the_snapshot_reads_it_back():
    """A shell harness's commands (mini-swe-agent's): a fresh bash in the repository's root each time,
    its edits seen by the next command, by the tests and by `snapshot`; a command past its time is
    killed with its children, and nothing of the host's filesystem is in view."""
    with RepoSession(_repo("def test_a():\n    assert add(1, 1) == 2\n")) as s:
        assert s.shell("echo $PAGER $HOME", env={"PAGER": "cat", "HOME": "/x"}).output == "cat /tmp\n"  # ours win
        run = s.shell("pwd && ls calc && sed -i 's/a + b/a - b/' calc/__init__.py && echo oops >&2; exit 3")
        assert (run.returncode, run.status) == (3, "ok") and run.output == "/repo\n__init__.py\noops\n"
        assert s.read("calc/__init__.py")["lines"][1] == "    return a - b"
        assert s.run_tests(["tests/test_calc.py::test_a"]).results["tests/test_calc.py::test_a"]["outcome"] == "failed"
        s.shell("printf '\\377' > blob.bin && mkdir -p new && echo x > new/f.txt")
        assert s.snapshot() == {**_repo("def test_a():\n    assert add(1, 1) == 2\n"), "calc/__init__.py": CALC.replace("+", "-"),
                                "blob.bin": b"\xff", "new/f.txt": "x\n"}
        slow = s.shell("(sleep 60 &) ; sleep 60", timeout_s=1)
        assert slow.status == "timeout" and slow.seconds < 5
        assert s.shell("ls /root /home /work 2>&1; cat /etc/passwd 2>&1 | head -1").output.count("No such file") == 4
