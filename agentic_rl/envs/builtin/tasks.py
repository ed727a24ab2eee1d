"""`tasks`: a user's own task files as an env — the prompts and answers of a file, the verifier and
the tools by name (docs/envs/tasks.md).

    env:
      name: tasks
      options:
        train: data/train.jsonl        # JSONL, Parquet, or a datasets save_to_disk directory
        heldout: data/test.jsonl       # or heldout_frac: 0.1 of train, split by split_seed
        verifier: math                 # a VERIFIERS name, or module:function / file.py:function
        tools: [calculator, mytools:lookup_price]
        system: You are ...

Options: `train` (required), `heldout` or `heldout_frac` (default 0.1 when no `heldout` file) and
`split_seed` (0), `columns` (renames: `{prompt: problem}`), `verifier` (default math) and
`verifier_options`, `tools` (built-in: calculator, python — sandboxed, stateful for the episode — or
any importable typed function), `system`, `format` (the tool-call format, default hermes),
`format_weight` (the gated format term, 0.1: it counts only when the answer is wrong, so it can
never outweigh one that is right), `tool_timeout_s` (5).

The splits are `train` and `heldout`; a held-out prompt that is also a training prompt is refused.
A row's `messages` come before its prompt (a system turn replaces `system`; few-shot pairs); its
`demonstration` is the SFT data, its tool calls replayed through the env's real tools. The few-shot
baseline (`fewshot`) shows the first two training rows that have a demonstration.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping
from typing import Any

from agentic_rl.data import task_files
from agentic_rl.envs.base import ToolEnv
from agentic_rl.envs.formats import get_format
from agentic_rl.envs.spec import EnvSpec
from agentic_rl.errors import UserError
from agentic_rl.registry import load_callable
from agentic_rl.rewards.base import RewardFn
from agentic_rl.rewards.rubric import GatedOutcome
from agentic_rl.rewards.verifiers import VERIFIERS
from agentic_rl.types import Task

SYSTEM_PROMPT = ("You are a careful assistant. Use the tools where they help. Give the final answer inside "
                 "<answer></answer> tags.")
SPLITS = ("train", "heldout")
OPTIONS = ("train", "heldout", "heldout_frac", "split_seed", "columns", "verifier", "verifier_options", "tools",
           "system", "format", "format_weight", "tool_timeout_s")


class SandboxPython:
    """The built-in `python` tool: a sandboxed interpreter that keeps its variables for the episode."""

    def __init__(self, timeout_s: float = 5.0):
        self.timeout_s, self._session = timeout_s, None

    def python(self, code: str) -> str:
        """Run Python code in a sandbox that keeps variables between calls; returns what it printed.

        Args:
            code: the Python program to run.
        """
        from agentic_rl.envs.builtin.retool import interpreter_text
        from agentic_rl.tools.sandbox import PythonSession, SandboxConfig

        if self._session is None:
            self._session = PythonSession(SandboxConfig(timeout_s=self.timeout_s))
        return interpreter_text(self._session.run(code))

    def close(self) -> None:
        if self._session is not None:
            self._session.close()
            self._session = None


def _calculator():
    from agentic_rl.tools.calculator import calculator

    return calculator


BUILTIN_TOOLS: dict[str, Callable[[], Any]] = {"calculator": _calculator, "python": SandboxPython}


class TaskFileEnv(ToolEnv):
    """A ToolEnv whose prompt is the row's: its `messages` first, then the prompt as the user turn."""

    def __init__(self, options: Mapping[str, Any]):
        made = [BUILTIN_TOOLS[name]() if name in BUILTIN_TOOLS else load_callable(name, "env.options.tools")
                for name in options.get("tools", [])]
        self._closers = [m.close for m in made if isinstance(m, SandboxPython)]
        tools = [m.python if isinstance(m, SandboxPython) else m for m in made]
        super().__init__(tools, str(options.get("system", SYSTEM_PROMPT)),
                         format=get_format(options.get("format", "hermes")),
                         timeout_s=float(options.get("tool_timeout_s", 5.0)))

    def reset(self, task: Task) -> list[dict]:
        self.task = task
        before = [dict(m) for m in task.meta.get("messages", ())]
        system = [] if before and before[0]["role"] == "system" else [{"role": "system", "content": self.system_prompt}]
        return [*system, *self.fewshot, *before, {"role": "user", "content": task.prompt}]

    def tool(self, name: str) -> Callable[..., Any]:
        """The tool called `name` (a demonstration's calls are replayed with it)."""
        return self.tools[name]

    def close(self) -> None:
        for close in self._closers:
            close()


def verifier_of(options: Mapping[str, Any]) -> tuple[RewardFn, tuple[str, ...]]:
    """(the verifier, the task fields it reads): a registered name or a user's function."""
    name = str(options.get("verifier", "math"))
    if ":" in name:
        return load_callable(name, "env.options.verifier"), ()
    entry = VERIFIERS.get(name)  # a miss lists the names
    return entry.make(options.get("verifier_options", {})), entry.reads


def demonstration(task: Task, env: TaskFileEnv) -> list[dict]:
    """The row's demonstration: an assistant text, or messages whose tool calls are run by the env's
    own tools (the tool results in the file, if any, are replaced by what the tools return)."""
    demo = task.meta.get("demonstration")
    if demo is None:
        raise UserError(f"task {task.id!r} has no demonstration column for SFT (sft.examples: 0 skips SFT)")
    if isinstance(demo, str):
        return [{"role": "assistant", "content": demo}]
    out: list[dict] = []
    for m in demo:
        if m["role"] == "tool":
            continue
        out.append(dict(m))
        for call in m.get("tool_calls") or ():
            fn = call["function"]
            args = json.loads(fn["arguments"]) if isinstance(fn["arguments"], str) else fn["arguments"]
            out.append({"role": "tool", "name": fn["name"], "content": str(env.tool(fn["name"])(**args))})
    return out


def file_spec(options: Mapping[str, Any], name: str, env_cls: Callable[[Mapping[str, Any]], TaskFileEnv],
              option_names: tuple[str, ...]) -> EnvSpec:
    """The spec of the task files these options name, its episodes in `env_cls` (a `TaskFileEnv`:
    this env, or one whose tools come from elsewhere, an MCP server)."""
    if "train" not in options:
        raise UserError(f"env.options.train: the {name} env needs a training file (JSONL, Parquet or a datasets directory)")
    _, reads = verifier_of(options)
    columns = dict(options.get("columns", {}))
    train = task_files.load_tasks(options["train"], "train", columns, reads)
    if options.get("heldout"):
        heldout = task_files.load_tasks(options["heldout"], "heldout", columns, reads)
    else:
        train, heldout = task_files.split_tasks(train, float(options.get("heldout_frac", 0.1)),
                                                int(options.get("split_seed", 0)))
        heldout = [Task(t.id, t.prompt, t.answer, {**t.meta, "split": "heldout"}) for t in heldout]
    task_files.check_disjoint(train, heldout, str(options.get("heldout") or options["train"]))
    by_split = {"train": train, "heldout": heldout}
    worked = tuple(t for t in train if "demonstration" in t.meta)[:2]
    return EnvSpec(name=name, make_env=functools.partial(_make_env, env_cls, worked), make_reward=make_reward,
                   tasks=lambda split, n, seed: task_files.draw(by_split[split], n, seed, repeat=split == "train"),
                   splits=SPLITS, demonstration=demonstration, options=option_names)


@functools.lru_cache(maxsize=8)
def _bound(key: str) -> EnvSpec:
    return file_spec(json.loads(key), "tasks", TaskFileEnv, OPTIONS)


def _make_env(env_cls: Callable[[Mapping[str, Any]], TaskFileEnv], worked: tuple[Task, ...],
              options: Mapping[str, Any]) -> TaskFileEnv:
    """An episode's env; with `fewshot` (the prompt-engineering baseline) the first two training rows
    with a demonstration go before the prompt as worked examples, their tool calls run for real."""
    env = env_cls(options)
    if options.get("fewshot"):
        env.fewshot = [m for t in worked for m in [{"role": "user", "content": t.prompt}, *demonstration(t, env)]]
    return env


def bind(options: Mapping[str, Any]) -> EnvSpec:
    """The spec of these options' files (read once per distinct options)."""
    return _bound(json.dumps(dict(options), sort_keys=True, default=str))


def make_reward(options: Mapping[str, Any]) -> RewardFn:
    verifier, _ = verifier_of(options)
    return GatedOutcome(verifier, float(options.get("format_weight", 0.1)))


def _unbound(split: str, n: int, seed: int) -> list[Task]:
    raise UserError("env tasks: its tasks come from env.options.train (and heldout); no file is named")


SPEC = EnvSpec(name="tasks", make_env=TaskFileEnv, make_reward=make_reward, tasks=_unbound, splits=SPLITS,
               demonstration=demonstration, options=OPTIONS, bind=bind)
SPECS = (SPEC,)
