"""Function calling from BFCL (the Berkeley Function Calling Leaderboard, bfcl-eval): a question and
the function docs BFCL gives with it; the policy answers with calls, and BFCL's own AST checker says
whether they are right (docs/envs/bfcl.md).

The function docs are the episode's tools, rendered by the run's tool-call format. BFCL's
single-turn functions are documentation only, nothing runs them: a call is recorded and answered
with a short note, and the episode ends at the first action without a call. The `multi_turn` split
(BFCL's multi_turn_base, never trained) runs the calls on bfcl-eval's simulated backends (file
system, trading, travel, messaging, vehicle control, ...), the episode's state; an action without a
call ends the user turn and the env shows the next one. The reward is BFCL's checker on the calls
the episode made (`rewards/bfcl.py`); the format term (ended by itself, every call parsed, named a
given function and, on a backend, ran) is gated.

Options: `format` (hermes), `format_weight` (0.1), `fewshot` (one worked example before the
question: a training entry's function doc, its request and its demonstration).
`bfcl:CATEGORY,CATEGORY` is the env trained on those of the training categories only
(`data/bfcl_tasks.py`): `train` and `heldout_in` draw from them, `heldout_out` is unchanged.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from agentic_rl.data import bfcl_multi_turn as multi_turn
from agentic_rl.data import bfcl_tasks as data
from agentic_rl.envs.base import StepResult
from agentic_rl.envs.formats import call_action, get_format
from agentic_rl.envs.spec import EnvSpec
from agentic_rl.rewards.bfcl import BFCLVerifier, CallFormat
from agentic_rl.rewards.rubric import GatedOutcome
from agentic_rl.types import Task

SYSTEM_PROMPT = (
    "You answer a request by calling the functions you are given. Make every call the request needs, one "
    "at a time, with the argument values it states. If no function fits the request, say so and make no call."
)
RECORDED = "Call recorded. Make the next call the request needs, or reply without a call if none is left."
OPTIONS = ("format", "format_weight")
DONE, NO_FUNCTION = "The calls are made.", "None of the functions I have can do this."


class BFCLEnv:
    """One episode: the task's function docs as tools. A single-turn entry's calls are recorded; a
    multi-turn entry's run on its backends, and a reply without a call shows the next user turn."""

    def __init__(self, options: Mapping[str, Any]):
        self.format = get_format(options.get("format", "hermes"))
        self.tool_schemas: Sequence[Mapping[str, Any]] = ()
        self.names: frozenset[str] = frozenset()
        self.fewshot = fewshot_messages() if options.get("fewshot") else ()
        self.backends: multi_turn.Backends | None = None
        self.later: list[list[dict]] = []

    def reset(self, task: Task) -> list[dict]:
        multi = "later_turns" in task.meta
        self.backends = multi_turn.Backends(task) if multi else None
        self.later = [list(turn) for turn in task.meta.get("later_turns", ())]
        self.tool_schemas = task.meta["tools"]
        self.names = frozenset(f["name"] for f in task.meta["functions"])
        given = [dict(m) for m in task.meta["messages"]]
        system = "\n\n".join([SYSTEM_PROMPT, *(m["content"] for m in given if m["role"] == "system")])
        return [{"role": "system", "content": system}, *self.fewshot, *(m for m in given if m["role"] != "system")]

    def step(self, action: str) -> StepResult:
        parsed = self.format.parse(action)
        if parsed.is_final:  # the reply to this user turn: the next one, or the end
            return StepResult(observation=tuple(self.later.pop(0))) if self.later else StepResult(terminated=True)
        messages = [{"role": "tool", "name": "error", "content": f"Error: {e}"} for e in parsed.errors]
        failed = 0
        for call in parsed.tool_calls:
            content, ok = self._call(call.name, call.arguments)
            failed += not ok
            messages.append({"role": "tool", "name": call.name, "content": content})
        return StepResult(observation=tuple(messages), tool_calls=parsed.tool_calls,
                          malformed_calls=len(parsed.errors), tool_errors=len(parsed.errors) + failed)

    def _call(self, name: str, arguments: Mapping[str, Any]) -> tuple[str, bool]:
        if self.backends is not None:
            return self.backends.call(name, arguments)
        if name not in self.names:
            return f"Error: no function {name!r}; the functions are: {', '.join(sorted(self.names))}", False
        return RECORDED, True


def demonstration(task: Task, env: BFCLEnv) -> list[dict]:
    """BFCL's possible answer (`data.first_answer`), one call an action (generation stops at a
    call's closing tag), each followed by the env's note, then a reply without a call; for an
    irrelevance entry, only that reply."""
    env.reset(task)
    if "later_turns" in task.meta:
        return multi_turn_demonstration(task, env)
    if task.answer is None:
        return [{"role": "assistant", "content": NO_FUNCTION}]
    out: list[dict] = []
    for name, args in data.first_answer(task.answer, task.meta["functions"]):
        call = {"type": "function", "function": {"name": name, "arguments": args}}
        out += [{"role": "assistant", "content": "", "tool_calls": [call]}, {"role": "tool", "name": name, "content": RECORDED}]
    return [*out, {"role": "assistant", "content": DONE}]


def multi_turn_demonstration(task: Task, env: BFCLEnv) -> list[dict]:
    """Each user turn's possible-answer calls run on the env's backends (their real results), a
    reply, then the next user turn as the env shows it."""
    out: list[dict] = []
    for turn, calls in enumerate(task.answer):
        for text in calls:
            name, args = env.backends.bind(text)
            call = {"type": "function", "function": {"name": name, "arguments": args}}
            out += [{"role": "assistant", "content": "", "tool_calls": [call]},
                    {"role": "tool", "name": name, "content": env.backends.call(name, args)[0]}]
        out.append({"role": "assistant", "content": DONE})
        out += task.meta["later_turns"][turn] if turn < len(task.meta["later_turns"]) else []
    return out


def fewshot_messages() -> tuple[dict, ...]:
    """One worked example (the prompt-engineering baseline). The example's function is not among the
    episode's tools, so its doc is shown in the example's request."""
    task = data.make_tasks(1, 777, "train", ("simple_python",))[0]
    env = BFCLEnv({})
    doc = json.dumps(task.meta["functions"][0])
    return ({"role": "user", "content": f"(An example, with the function {doc})\n{task.prompt}"},
            *demonstration(task, env))


def hostile_actions(task: Task, env: BFCLEnv) -> list[str]:
    """Calls that would be dangerous if anything ran them, a function not given, arguments of the
    wrong shape, and a flood of calls: each is recorded or an error observation, never run."""
    env.reset(task)
    name = task.meta["functions"][0]["name"]
    return [call_action(env.format, "os.system", command="rm -rf /"),
            call_action(env.format, "__import__", module="subprocess"),
            call_action(env.format, name, **{"__class__": {"__init__": None}}),
            call_action(env.format, name, payload="x" * 50_000),
            "".join(call_action(env.format, name) for _ in range(200))]


def make_spec(name: str, categories: Sequence[str] | None = None) -> EnvSpec:
    return EnvSpec(
        name=name, make_env=BFCLEnv,
        make_reward=lambda options: GatedOutcome(BFCLVerifier(), float(options.get("format_weight", 0.1)), CallFormat()),
        tasks=lambda split, n, seed: (multi_turn.make_tasks(n, seed) if split == "multi_turn"
                                      else data.make_tasks(n, seed, split, categories)),
        splits=(*data.SPLITS, "multi_turn"), demonstration=demonstration, options=OPTIONS, hostile_actions=hostile_actions)


def categories_spec(argument: str) -> EnvSpec:
    """`bfcl:simple_python,parallel`: the env trained on those categories."""
    categories = tuple(c for c in argument.split(",") if c)
    bad = [c for c in categories if c not in data.TRAIN_CATEGORIES]
    if bad or not categories:
        raise ValueError(f"bfcl:{argument}: not a training category: {bad[:1]}; "
                         f"known: {', '.join(data.TRAIN_CATEGORIES)}")
    return make_spec(f"bfcl:{argument}", categories)


SPECS = (make_spec("bfcl"),)
