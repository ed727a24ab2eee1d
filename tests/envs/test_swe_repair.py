"""The swe_repair env: check-env through the real rollout loop, the reward on hand-made right and
wrong patches, a user's own directory of instances (a project that is not one of the shipped ones),
hostile actions against the host, and no leaks after 200 episodes."""

from __future__ import annotations

import concurrent.futures
import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from agentic_rl.data import swe_instances as data
from agentic_rl.engines.base import SamplingParams
from agentic_rl.engines.scripted import ScriptedEngine
from agentic_rl.envs.builtin.swe_repair import RepoTestsReward, make_reward
from agentic_rl.envs.registry import get_env
from agentic_rl.rollout.conformance import check_env
from agentic_rl.rollout.loop import Budget, rollout
from agentic_rl.tools.sandbox.memory import memory_cgroup_parent
from agentic_rl.types import ToolCall, Trajectory, Turn

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")
FAST = {"per_test_s": 1.0}  # stops the hostile actions' hanging test soon; the projects' own tests take milliseconds

STATS = '''def mean(xs):
    return sum(xs) / len(xs)


def median(xs):
    s = sorted(xs)
    mid = len(s) // 2
    if len(s) % 2:
        return s[mid]
    return (s[mid] + s[mid + 1]) / 2


def spread(xs):
    return max(xs) - min(xs)
'''
STATS_TESTS = '''import unittest

from tinystats import mean, median, spread


class TestStats(unittest.TestCase):
    def test_mean(self):
        self.assertEqual(mean([1, 2, 3, 6]), 3)

    def test_median_odd(self):
        self.assertEqual(median([3, 1, 2]), 2)

    def test_median_even(self):
        self.assertEqual(median([4, 1, 3, 2]), 2.5)

    def test_spread(self):
        self.assertEqual(spread([5, 1, 9]), 8)
'''
BUG, FIX = "(s[mid] + s[mid + 1]) / 2", "(s[mid - 1] + s[mid]) / 2"


@pytest.fixture
def user_dir(tmp_path) -> Path:
    """A directory of instances in SWE-bench's schema: one built-in-runner instance, one whose own
    test command is `python -m unittest -v` (dotted ids, the unittest log parser)."""
    repo = tmp_path / "stats-1"
    (repo / "tinystats").mkdir(parents=True)
    (repo / "tinystats" / "__init__.py").write_text(STATS)
    (repo / "tests").mkdir()
    (repo / "tests" / "__init__.py").write_text("")
    (repo / "tests" / "test_stats.py").write_text(STATS_TESTS)
    ids = ["tests/test_stats.py::TestStats::test_" + n for n in ("mean", "median_odd", "median_even", "spread")]
    dotted = ["tests.test_stats.TestStats.test_" + n for n in ("mean", "median_odd", "median_even", "spread")]
    rows = [{"instance_id": "stats-1", "problem_statement": "median([4, 1, 3, 2]) gives 3.0, not 2.5",
             "FAIL_TO_PASS": [ids[2]], "PASS_TO_PASS": [ids[0], ids[1], ids[3]], "split": "train"},
            {"instance_id": "stats-1-unittest", "snapshot": "stats-1", "problem_statement": "median is wrong for even lists",
             "FAIL_TO_PASS": json.dumps([dotted[2]]), "PASS_TO_PASS": json.dumps([dotted[0], dotted[1], dotted[3]]),
             "test_command": "python -m unittest -v {tests}", "log_parser": "unittest", "split": "test"}]
    # the same two bugs reported in other words: three instances a split, as a seeded split needs
    rows += [{**r, "instance_id": f"{r['instance_id']}-{k}", "snapshot": "stats-1",
              "problem_statement": f"{r['problem_statement']} (report {k})"} for r in rows[:2] for k in (2, 3)]
    (tmp_path / "instances.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return tmp_path


def _trajectory(task, *calls: tuple[str, dict]) -> Trajectory:
    turns = tuple(Turn((), (), (), "", "stop", tool_calls=(ToolCall(n, a),)) for n, a in calls)
    return Trajectory(task, turns, terminated=True)


@pytest.fixture(autouse=True)
def own_tmp(tmp_path, monkeypatch):
    """A temp dir of the test's own: whatever the code leaves in one is seen (the machine's /tmp is
    shared with other processes)."""
    own = tmp_path / "tmp"
    own.mkdir()
    monkeypatch.setenv("TMPDIR", str(own))
    monkeypatch.setattr(tempfile, "tempdir", str(own))


def test_check_env_passes_every_check_and_the_host_is_as_it_was(tokenizer):
    """Demonstrations through the real rollout loop and tokenizer (reward 1, SFT sequence == rollout
    sequence, mask exactly the sampled tokens), the budgets, and the env's own hostile actions
    (paths out, a planted symlink, deleting the repository, forked daemons, a hang, writes outside
    the copy): observations only, and nothing of the host changed."""
    before = _host_state()
    checks = check_env("swe_repair", tokenizer, FAST, n=1)
    assert [c for c in checks if not c.passed] == []
    assert "12 of the env's own" in next(c.detail for c in checks if c.name == "bad actions are observations")
    assert _host_state() == before


def test_reward_on_right_and_wrong_patches(user_dir):
    spec = get_env(f"swe_repair:{user_dir}")
    assert spec.splits == ("train", "test")
    (task,) = spec.tasks("train", 1, 0)
    path = "tinystats/__init__.py"
    reward = RepoTestsReward(partial_weight=0.5)
    right = reward(task, _trajectory(task, ("edit", {"path": path, "old": BUG, "new": FIX})))
    assert right.value == 1.0 and right.details["resolved"] == 1.0
    assert reward(task, _trajectory(task, ("edit", {"path": "./" + path, "old": BUG, "new": FIX}))).value == 1.0
    # fixes the median and breaks the mean: a pass-to-pass test fails, so no credit at all
    broken = reward(task, _trajectory(task, ("edit", {"path": path, "old": BUG, "new": FIX}),
                                      ("edit", {"path": path, "old": "sum(xs) / len(xs)", "new": "sum(xs)"})))
    assert (broken.value, broken.details["f2p_fixed"], broken.details["p2p_kept"]) == (0.0, 1.0, 2 / 3)
    wrong = reward(task, _trajectory(task, ("edit", {"path": path, "old": BUG, "new": "(s[mid] + s[mid]) / 2"})))
    assert (wrong.value, wrong.details["edited"]) == (0.0, 1.0)
    # "fixing" the failing test, an edit that does not apply, and no edit: nothing to judge
    for calls in ([("edit", {"path": "tests/test_stats.py", "old": "2.5)", "new": "3.0)"})],
                  [("edit", {"path": path, "old": "no such text", "new": FIX})], []):
        score = reward(task, _trajectory(task, *calls))
        assert (score.value, score.details["edited"], score.cost) == (0.0, 0.0, 0.0)
    with pytest.raises(ValueError, match=r"\[0, 1\)"):
        RepoTestsReward(partial_weight=1.0)


def test_a_user_instance_with_its_own_test_command(user_dir):
    spec = get_env(f"swe_repair:{user_dir}")
    (task,) = spec.tasks("test", 1, 0)
    env = spec.make_env(FAST)
    env.reset(task)
    try:
        before = env.run_tests("tests.test_stats")
        assert "1 failed, 3 passed" in before and "FAILED tests.test_stats.TestStats.test_median_even" in before
        assert env.edit("tinystats/__init__.py", BUG, FIX).startswith("Edited")
        assert env.run_tests("tests.test_stats").startswith("4 passed")
    finally:
        env.close()
    edit = ("edit", {"path": "tinystats/__init__.py", "old": BUG, "new": FIX})
    assert make_reward({}).__call__(task, _trajectory(task, edit)).value == 1.0


def test_partial_credit_never_reaches_a_fix(tmp_path):
    """Two failing tests, one fixed: partial_weight x 1/2."""
    repo = tmp_path / "two"
    repo.mkdir()
    (repo / "m.py").write_text("def f():\n    return 1\n\ndef g():\n    return 1\n")
    (repo / "test_m.py").write_text("from m import f, g\n\ndef test_f():\n    assert f() == 2\n\ndef test_g():\n    assert g() == 3\n")
    row = {"instance_id": "two", "problem_statement": "f and g", "FAIL_TO_PASS": ["test_m.py::test_f", "test_m.py::test_g"],
           "PASS_TO_PASS": []}
    (tmp_path / "instances.jsonl").write_text(json.dumps(row) + "\n")
    (task,) = get_env(f"swe_repair:{tmp_path}").tasks("test", 1, 0)
    half = RepoTestsReward(0.4)(task, _trajectory(task, ("edit", {"path": "m.py", "old": "f():\n    return 1",
                                                                  "new": "f():\n    return 2"})))
    assert (half.value, half.details["f2p_fixed"]) == (0.4 * 0.5, 0.5)


def test_the_instance_directory_is_checked(tmp_path):
    with pytest.raises(FileNotFoundError, match="instances.jsonl"):
        data.load_dir(tmp_path)
    (tmp_path / "instances.jsonl").write_text(json.dumps({"instance_id": "x", "problem_statement": "p",
                                                          "FAIL_TO_PASS": [], "PASS_TO_PASS": []}) + "\n")
    with pytest.raises(ValueError, match="no snapshot directory"):
        data.load_dir(tmp_path)
    (tmp_path / "x").mkdir()
    with pytest.raises(ValueError, match="FAIL_TO_PASS is empty"):
        data.load_dir(tmp_path)
    with pytest.raises(ValueError, match="name the env swe_repair:"):
        get_env("swe_repair").make_env({"instances": str(tmp_path)})


def _host_state() -> dict:
    """What an escape or a leak would change on the host: this process's fds and child processes,
    the temp dir's entries, the memory cgroups of its sandboxes, the shipped projects' bytes."""
    me = os.getpid()
    children = [p for p in os.listdir("/proc") if p.isdigit() and _ppid(p) == me]
    parent = memory_cgroup_parent()
    mine = f"agentic-rl-sandbox-{me}-"  # this process's sandboxes: another process's may come and go meanwhile
    digest = hashlib.sha256()
    for path in sorted(data.PROJECTS_DIR.rglob("*")):
        if path.is_file():
            digest.update(path.read_bytes())
    return {"fds": len(os.listdir("/proc/self/fd")), "children": len(children),
            "tmp": sorted(os.listdir(tempfile.gettempdir())),
            "cgroups": sorted(p.name for p in parent.iterdir() if p.name.startswith(mine)) if parent else [],
            "projects": digest.hexdigest()}


def _ppid(pid: str) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return -1


def test_no_sandbox_process_temp_dir_or_fd_remains_after_200_episodes(tokenizer):
    """200 episodes through the real rollout loop, each starting a sandbox (a list_files call) and
    ending with a final answer, then scored."""
    spec = get_env("swe_repair")
    tasks = spec.tasks("train", 200, 0)
    call = '<tool_call>\n{"name": "list_files", "arguments": {"path": "tests"}}\n</tool_call>'
    script = lambda row, turn: call if turn == 0 else "done" + tokenizer.eos_token  # noqa: E731
    before = _host_state()
    envs = []

    def make():
        envs.append(spec.make_env(FAST))
        return envs[-1]

    def run(part):  # eight rollouts at once, as concurrent episodes are
        return rollout(ScriptedEngine(tokenizer, script), make, part, 1,
                       SamplingParams(1.0, 1.0, 64, ("</tool_call>",)), Budget(4, 64, 256))[0]
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        groups = [g for part in pool.map(run, [tasks[i::8] for i in range(8)]) for g in part]
    trajectories = [g.trajectories[0] for g in groups]
    assert all(t.terminated and len(t.turns) == 2 and t.turns[0].observation.startswith("tests/") for t in trajectories)
    assert all(e.session is None for e in envs)
    reward = make_reward({})
    assert [reward(t.task, t).value for t in trajectories] == [0.0] * 200
    assert _host_state() == before


@pytest.mark.slow
def test_demonstrations_score_one_on_every_shipped_instance():
    """The demonstrations as the policy, on all shipped instances (~10 minutes on 2 busy cores):
    the env is right wherever the small model scores low."""
    from agentic_rl.data.swe_demos import demonstration
    from agentic_rl.envs.builtin.swe_repair import SweRepairEnv

    reward = make_reward({})

    def score(inst) -> tuple[str, float]:
        task = data.to_task(inst)
        env = SweRepairEnv({})
        try:
            demo = demonstration(task, env)
        finally:
            env.close()
        calls = [(c["function"]["name"], c["function"]["arguments"]) for m in demo for c in m.get("tool_calls", ())]
        return inst.instance_id, reward(task, _trajectory(task, *calls)).value
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        scores = dict(pool.map(score, data.load_shipped()))
    assert {k: v for k, v in scores.items() if v != 1.0} == {} and len(scores) == len(data.load_shipped())


def test_check_env_on_a_users_directory(tokenizer, user_dir):
    """A user's instances (dotted unittest ids, no demonstrations): every check passes or is skipped."""
    checks = check_env(f"swe_repair:{user_dir}", tokenizer, FAST, n=3)
    assert [c for c in checks if not c.passed] == []
