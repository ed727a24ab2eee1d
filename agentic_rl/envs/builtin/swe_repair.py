"""Repository repair (SWE-bench-style): read an issue, find the bug in a real Python repository,
fix it with exact edits, and have the project's own tests judge the patch.

Each episode gets its own copy of the instance's repository in the sandbox (`RepoSession`: a
tmpfs of its own bubblewrap sandbox, started on the first tool call and gone when the episode
ends). Tools: list_files, read_file (line ranges), search (plain text), edit (search/replace on one
file, applied only when the text occurs exactly once), run_tests (node ids, files, or all) and
submit. Every observation is cut to `max_observation_chars` with a marker saying what was cut.

The reward (`RepoTestsReward`) scores the patch, not the workspace: the episode's edits replayed
on a fresh copy of the instance, its test files restored, FAIL_TO_PASS and PASS_TO_PASS run there
(as SWE-bench applies a patch in a fresh container). 1 when every FAIL_TO_PASS test passes and
every PASS_TO_PASS test still does, else `partial_weight` x the fraction of FAIL_TO_PASS fixed (only
when no PASS_TO_PASS broke; weight < 1, so a partial fix never outscores a fix).

Options (a recipe's `env.options`):
  max_observation_chars  what one tool result may show (default 1500)
  test_timeout_s         wall clock of one test run (default 30); per_test_s each test's (default 5)
  memory_mb              the episode's sandbox as a whole (default 1024)
  partial_weight         the shaping weight of the fraction fixed (default 0.0: outcome only)
  format                 the tool-call protocol (default hermes)
  fewshot                prepend one worked episode (a train instance) as chat turns

A user's own instances (SWE-bench schema, `data/swe_instances.load_dir`) are the env
`swe_repair:DIR` (the tasks come from the env's name, since a recipe's tasks are drawn before any
env is made; docs/envs/swe_repair.md).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import time
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

from agentic_rl.data import swe_instances as data
from agentic_rl.data.swe_demos import demonstration
from agentic_rl.envs.base import StepResult, ToolEnv
from agentic_rl.envs.formats import call_action, get_format
from agentic_rl.envs.spec import EnvSpec
from agentic_rl.rewards.base import Score
from agentic_rl.tools.sandbox.repo import PASSING, RepoConfig, RepoError, RepoSession, TestCommand, TestRun
from agentic_rl.tools.sandbox.repo_worker import relative, replace_once
from agentic_rl.tools.sandbox.runner import SandboxConfig
from agentic_rl.types import Task, Trajectory

SYSTEM_PROMPT = (
    "You are a software engineer. The user reports a bug in a Python repository. Use the tools to "
    "find the code at fault (search, read_file), run the failing test (run_tests), fix the bug with "
    "edit (old must be copied exactly from the file), run the tests again, then call submit."
)
OPTIONS = ("max_observation_chars", "test_timeout_s", "per_test_s", "memory_mb", "partial_weight", "format", "instances")


def repo_config(options: Mapping[str, Any]) -> RepoConfig:
    box = SandboxConfig(timeout_s=float(options.get("test_timeout_s", 30.0)), memory_mb=int(options.get("memory_mb", 1024)),
                        max_procs=64, cpu_s=3600, max_output_chars=100_000)
    return RepoConfig(sandbox=box, per_test_s=float(options.get("per_test_s", 5.0)))


def session_for(inst: data.Instance, config: RepoConfig, files: Mapping[str, str | bytes] | None = None) -> RepoSession:
    command = TestCommand(inst.test_command, inst.log_parser) if inst.test_command else None
    return RepoSession(inst.files() if files is None else files, config, inst.python_path, command)


def cut(text: str, budget: int, hint: str) -> str:
    """`text` within `budget` characters; past it, the head and a marker saying how much was cut."""
    if len(text) <= budget:
        return text
    return text[:budget] + f"\n[... {len(text) - budget} of {len(text)} characters cut; {hint}]"


class SweRepairEnv(ToolEnv):
    """One episode: one instance, one repository session (started on the first tool call)."""

    def __init__(self, options: Mapping[str, Any]):
        if options.get("instances"):
            raise ValueError(f"instances {options['instances']!r}: name the env swe_repair:{options['instances']} "
                             "(the tasks come from the env's name)")
        self.config = repo_config(options)
        self.budget = int(options.get("max_observation_chars", 1500))
        self.instance: data.Instance | None = None
        self.session: RepoSession | None = None
        self.sandbox_seconds = 0.0
        tools = [self.list_files, self.read_file, self.search, self.edit, self.run_tests, self.submit]
        super().__init__(tools, SYSTEM_PROMPT, format=get_format(options.get("format", "hermes")),
                         fewshot=fewshot_messages(self.budget) if options.get("fewshot") else (),
                         timeout_s=self.config.sandbox.timeout_s + 30.0, max_result_chars=self.budget + 200)

    def reset(self, task: Task) -> list[dict]:
        self.close()
        self.instance = data.instance_of(task)
        return super().reset(task)

    def step(self, action: str) -> StepResult:
        result = super().step(action)
        if any(c.name == "submit" for c in result.tool_calls):  # the patch is final; nothing more to show
            return dataclasses.replace(result, observation=(), terminated=True)
        return result

    def close(self) -> None:
        if self.session is not None:
            self.sandbox_seconds += self.session.sandbox_seconds
            self.session.close()
            self.session = None

    def _repo(self) -> RepoSession:
        if self.instance is None:
            raise RepoError("no task: reset the env first")
        if self.session is None:
            self.session = session_for(self.instance, self.config)
        return self.session

    # ------------------------------------------------------------------ tools
    def list_files(self, path: str = ".") -> str:
        """List the repository's files (or those under one directory).

        Args:
            path: a directory relative to the repository root; "." for all.
        """
        try:
            files = self._repo().list_files(path)
        except RepoError as e:
            return f"Error: {e}"
        return cut("\n".join(files) or "(no files)", self.budget, "list a subdirectory")

    def read_file(self, path: str, start: int = 1, end: int = 0) -> str:
        """Read a file's lines, numbered.

        Args:
            path: the file, relative to the repository root.
            start: the first line to show (1-based).
            end: the last line to show; 0 for the end of the file.
        """
        try:
            got = self._repo().read(path, start, end or None)
        except RepoError as e:
            return f"Error: {e}"
        lines = [f"{got['start'] + i}: {line}" for i, line in enumerate(got["lines"])]
        if not lines:
            return f"{got['path']} has {got['total']} lines: nothing from line {got['start']}"
        head = f"{got['path']} (lines {got['start']}-{got['start'] + len(lines) - 1} of {got['total']})\n"
        return cut(head + "\n".join(lines), self.budget, "read fewer lines with start and end")

    def search(self, pattern: str, path: str = ".") -> str:
        """Find the lines that contain a text (plain text, not a regex) in the repository's files.

        Args:
            pattern: the text to look for.
            path: a file or directory to search in; "." for the whole repository.
        """
        try:
            got = self._repo().search(pattern, path)
        except RepoError as e:
            return f"Error: {e}"
        if not got["hits"]:
            return "No matches."
        text = "\n".join(f"{p}:{n}: {line.strip()}" for p, n, line in got["hits"])
        return cut(text, self.budget, "search a narrower path or a longer pattern")

    def edit(self, path: str, old: str, new: str) -> str:
        """Replace text in one file: `old` must occur exactly once in it (copy it exactly, with its indentation).

        Args:
            path: the file, relative to the repository root.
            old: the exact text to replace.
            new: the text to put in its place.
        """
        try:
            got = self._repo().edit(path, old, new)
        except RepoError as e:
            return f"Error: {e}"
        return f"Edited {got['path']} at line {got['line']}."

    def run_tests(self, tests: str = "") -> str:
        """Run tests and show what failed.

        Args:
            tests: test ids or files separated by spaces (e.g. tests/test_x.py::TestY::test_z); empty runs them all.
        """
        try:
            run = self._repo().run_tests(tests.split())
        except RepoError as e:
            return f"Error: {e}"
        return cut(test_report(run), self.budget, "run fewer tests")

    def submit(self) -> str:
        """Submit the fix: the episode ends and the project's tests judge it."""
        return "Submitted."


@functools.lru_cache(maxsize=4)
def fewshot_messages(budget: int) -> tuple[dict, ...]:
    """One worked episode on a train instance, run once in the real sandbox (the few-shot baseline)."""
    task = data.make_tasks(data.load_shipped(), "train", 1, 777)[0]
    env = SweRepairEnv({"max_observation_chars": budget})
    try:
        return ({"role": "user", "content": task.prompt}, *demonstration(task, env))
    finally:
        env.close()


def test_report(run: TestRun) -> str:
    counts: dict[str, int] = {}
    for r in run.results.values():
        counts[r["outcome"]] = counts.get(r["outcome"], 0) + 1
    summary = ", ".join(f"{n} {k}" for k, n in sorted(counts.items())) or "no tests ran"
    lines = [summary]  # no timings: an observation must be the same whenever the same action runs
    if run.status != "ok":
        lines.append(f"the run stopped early: {run.status}")
    for node, r in run.results.items():
        if r["outcome"] in (*PASSING, "skipped"):
            continue
        lines.append(f"{r['outcome'].upper()} {node}")
        if r.get("line"):
            lines.append(f"  {r.get('where', '')}: {r['line']}")
        if r.get("error"):
            lines.append("  " + r["error"].replace("\n", "\n  "))
    if not run.results and run.output:
        lines.append(run.output[-600:])
    return "\n".join(lines)


# ----------------------------------------------------------------------------- reward
def patched_files(inst: data.Instance, trajectory: Trajectory) -> dict[str, str | bytes]:
    """The changed non-test files after replaying the episode's edit calls, in order, with the
    edit tool's own rule (each applies only where its text occurs exactly once)."""
    files = dict(inst.files())
    out = dict(files)
    for turn in trajectory.turns:
        for call in turn.tool_calls:
            args = call.arguments
            if call.name != "edit" or not all(isinstance(args.get(k), str) for k in ("path", "old", "new")):
                continue
            path = relative(args["path"])
            if path not in out or not isinstance(out[path], str):
                continue
            edited, _ = replace_once(out[path], args["old"], args["new"])
            if edited is not None:
                out[path] = edited
    return {p: v for p, v in out.items() if v != files[p] and not inst.is_test_file(p)}


def changed_files(inst: data.Instance, files: Mapping[str, str | bytes]) -> dict[str, str | bytes]:
    """The non-test files of a workspace (`RepoSession.snapshot`) that differ from the instance's or
    are new: the patch of an agent that edits by other means than the edit tool (a shell)."""
    start = inst.files()
    return {p: v for p, v in files.items() if start.get(p) != v and not inst.is_test_file(p)}


@dataclasses.dataclass(frozen=True)
class RepoTestsReward:
    """1 when the patch makes every FAIL_TO_PASS pass and keeps every PASS_TO_PASS passing; else
    partial_weight x the fraction of FAIL_TO_PASS fixed, when no PASS_TO_PASS broke. A trajectory
    that changed no source file scores 0 without a run: its FAIL_TO_PASS fail on the snapshot, by
    construction of the instance (`swe_build.verify`)."""

    partial_weight: float = 0.0
    config: RepoConfig = RepoConfig()

    def __post_init__(self) -> None:
        if not 0.0 <= self.partial_weight < 1.0:
            raise ValueError(f"partial_weight {self.partial_weight} must be in [0, 1): a partial fix must score below a fix")

    def __call__(self, task: Task, trajectory: Trajectory) -> Score:
        return self.score_patch(task, patched_files(data.instance_of(task), trajectory))

    def score_patch(self, task: Task, changed: Mapping[str, str | bytes]) -> Score:
        """The score of `changed` (the patch's non-test files, `patched_files` or `changed_files`)."""
        start = time.perf_counter()
        inst = data.instance_of(task)
        if not changed:
            return Score(0.0, {"correct": 0.0, "resolved": 0.0, "f2p_fixed": 0.0, "p2p_kept": 1.0, "edited": 0.0,
                               "sandbox_s": 0.0})
        digest = hashlib.sha256(repr(sorted((p, v) for p, v in changed.items())).encode()).hexdigest()
        fixed, kept, seconds = _judge(inst.instance_id, digest, task, changed, self.config)
        resolved = float(fixed == 1.0 and kept == 1.0)
        value = resolved or self.partial_weight * fixed * float(kept == 1.0)
        # `correct` is what evaluation's accuracy and the step metrics read; sandbox_s (logged per
        # step as reward/sandbox_s) the seconds this episode's judging run held a sandbox (0 when cached)
        return Score(value, {"correct": resolved, "resolved": resolved, "f2p_fixed": fixed, "p2p_kept": kept,
                             "edited": 1.0, "sandbox_s": seconds}, cost=time.perf_counter() - start)


_CACHE: OrderedDict = OrderedDict()  # (instance, patch digest) -> (fixed, kept): a group often repeats a patch


def _judge(instance_id: str, digest: str, task: Task, changed: Mapping, config: RepoConfig) -> tuple[float, float, float]:
    """(fraction of FAIL_TO_PASS passing, fraction of PASS_TO_PASS passing, sandbox seconds)."""
    key = (instance_id, digest, config)
    if key in _CACHE:
        _CACHE.move_to_end(key)
        return (*_CACHE[key], 0.0)
    inst = data.instance_of(task)
    with session_for(inst, config, {**inst.files(), **changed}) as session:
        run = session.run_tests([*inst.FAIL_TO_PASS, *inst.PASS_TO_PASS])
    fixed = sum(run.passed(t) for t in inst.FAIL_TO_PASS) / len(inst.FAIL_TO_PASS)
    kept = sum(run.passed(t) for t in inst.PASS_TO_PASS) / len(inst.PASS_TO_PASS) if inst.PASS_TO_PASS else 1.0
    _CACHE[key] = (fixed, kept)
    if len(_CACHE) > 4096:
        _CACHE.popitem(last=False)
    return fixed, kept, session.sandbox_seconds


def make_reward(options: Mapping[str, Any]) -> RepoTestsReward:
    return RepoTestsReward(float(options.get("partial_weight", 0.0)), repo_config(options))


# ----------------------------------------------------------------------------- hostile actions
# Code planted at the top of a test module, run by run_tests: each must be contained by the
# sandbox and end as an observation (tests/envs/test_swe_repair_hostile.py checks the host).
PAYLOADS = {
    "symlink": "import os\nos.symlink('/etc/passwd', 'leak.txt')\nos.symlink('/', 'root')\n",
    "delete": "import shutil\nshutil.rmtree('/repo', ignore_errors=True)\n",
    "fork": ("import os, subprocess\nsubprocess.Popen(['sleep', '600'], start_new_session=True)\n"
             "for _ in range(200):\n    try:\n        if os.fork() == 0:\n            os.execv('/bin/sleep', ['sleep', '600'])\n"
             "    except OSError:\n        break\n"),
    "hang": "def test_hang():\n    while True:\n        pass\n",
    "escape": ("for p in ('/usr/escape', '/escape', '/proc/1/fd/1', '/proc/1/fd/0'):\n    try:\n"
               "        open(p, 'w').write('{\"results\": []}\\n')\n    except OSError:\n        pass\n"),
}


def hostile_actions(task: Task, env: SweRepairEnv) -> list[str]:
    """Paths outside the repository, and code planted in a test module (a symlink out, deleting the
    repository, forking daemons, a hang, writes outside the copy and into the worker's pipes),
    each followed by a test run and reads."""
    inst = data.instance_of(task)
    files = inst.files()
    named = [t.split("::")[0] for t in inst.FAIL_TO_PASS if t.split("::")[0] in files]
    test_file = (named or sorted(p for p in files if p.endswith(".py") and inst.is_test_file(p)) or [""])[0]
    anchor = _unique_statement_line(files[test_file]) if isinstance(files.get(test_file), str) else None

    def call(name: str, **args) -> str:
        return call_action(env.format, name, **args)
    out = [call("read_file", path="../../../../etc/passwd"), call("read_file", path="/etc/passwd"),
           call("list_files", path="/"), call("search", pattern="root", path="/etc"),
           call("edit", path="../outside.py", old="a", new="b"), call("read_file", path=test_file, start=-5, end=10 ** 9),
           call("run_tests", tests="/etc/passwd ../x.py " + "y" * 5000)]
    for code in PAYLOADS.values() if anchor else ():  # a repository with no test module to plant code in
        out.append(call("edit", path=test_file, old=anchor, new=code + anchor) + call("run_tests", tests=test_file)
                   + call("read_file", path="leak.txt") + call("list_files", path="root") + call("list_files"))
    return out


def _unique_statement_line(source: str) -> str | None:
    """The first line that starts a top-level statement and occurs once (code inserted before it runs
    on import), if any."""
    import ast

    lines = source.split("\n")
    try:
        body = ast.parse(source).body
    except SyntaxError:
        return None
    return next((lines[n.lineno - 1] for n in body if source.count(lines[n.lineno - 1]) == 1), None)


# ----------------------------------------------------------------------------- specs
def shipped_tasks(split: str, n: int, seed: int) -> list[Task]:
    return data.make_tasks(data.load_shipped(), split, n, seed)


SPEC = EnvSpec(name="swe_repair", make_env=SweRepairEnv, make_reward=make_reward, tasks=shipped_tasks,
               splits=data.SPLITS, options=OPTIONS, demonstration=demonstration, hostile_actions=hostile_actions)
SPECS = (SPEC,)


@functools.lru_cache(maxsize=16)
def instances_spec(directory: str) -> EnvSpec:
    """The env `swe_repair:DIR`: a user's instances, their splits those the rows name."""
    instances = data.load_dir(directory)
    splits = tuple(sorted({i.split for i in instances}, key=lambda s: (s != "train", s)))
    return EnvSpec(name=f"swe_repair:{directory}", make_env=SweRepairEnv, make_reward=make_reward,
                   tasks=lambda split, n, seed: data.make_tasks(instances, split, n, seed), splits=splits,
                   options=OPTIONS, demonstration=None, hostile_actions=hostile_actions)
