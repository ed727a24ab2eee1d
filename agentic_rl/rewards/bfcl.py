"""BFCL's own verdict on an episode's function calls: bfcl-eval's AST checker (`ast_checker`), called
on the calls our format parsed, as BFCL's evaluation calls it on a function-calling model's decoded
output; on a multi-turn entry, its `multi_turn_checker` (the backends' state and the calls' results
after each user turn against the possible answer's) (docs/envs/bfcl.md).

bfcl-eval is installed without its dependencies (`pip install --no-deps`): its checker module
imports `bfcl_eval.constants.model_config` for one lookup, whether a model's function names had
their dots replaced (`MODEL_CONFIG_MAPPING[model].underscore_to_dot`), and that module imports every
model handler BFCL ships (tree-sitter, mistralai, cohere, google-genai, qwen-agent, ...). The
checker is loaded with a stand-in for that one module holding the entry of the model we score as
(`CHECKER_MODEL`, BFCL's Qwen3 function-calling entry: the same `<tool_call>` JSON as our hermes
format, names unchanged); with the handlers installed the real module is used, with the same entry.
"""

from __future__ import annotations

import copy
import functools
import importlib
import sys
import types
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from agentic_rl.rewards.base import Score
from agentic_rl.types import Task, ToolCall, Trajectory

CHECKER_MODEL = "Qwen/Qwen3-8B-FC"  # BFCL's model_config key; underscore_to_dot=False
_MODEL_CONFIG = "bfcl_eval.constants.model_config"
_AST_CHECKER = "bfcl_eval.eval_checker.ast_eval.ast_checker"


@functools.cache
def checker_module() -> types.ModuleType:
    """bfcl_eval's ast_checker module (see the module docstring for how it is imported)."""
    if _MODEL_CONFIG in sys.modules or _AST_CHECKER in sys.modules:
        return importlib.import_module(_AST_CHECKER)
    stand_in = types.ModuleType(_MODEL_CONFIG)
    stand_in.MODEL_CONFIG_MAPPING = {CHECKER_MODEL: types.SimpleNamespace(underscore_to_dot=False)}
    sys.modules[_MODEL_CONFIG] = stand_in
    try:
        return importlib.import_module(_AST_CHECKER)
    finally:  # only the checker holds the stand-in; a later real import finds the real module
        del sys.modules[_MODEL_CONFIG]


def check_calls(functions: Sequence[dict], calls: Sequence[ToolCall], ground_truth: Any, category: str) -> dict:
    """BFCL's verdict (`{"valid": bool, "error": [...], "error_type": ...}`) on `calls` answering an
    entry with these function docs and possible answer, as BFCL's `ast_file_runner` asks it. The
    checker may edit what it is given: it gets copies."""
    from bfcl_eval.constants.enums import Language

    output = [{c.name: copy.deepcopy(dict(c.arguments))} for c in calls]
    return checker_module().ast_checker(copy.deepcopy(list(functions)), output, copy.deepcopy(ground_truth),
                                        Language.PYTHON, category, CHECKER_MODEL.replace("/", "_"))


def check_multi_turn(task: Task, decoded: list[list[list[str]]]) -> dict:
    """BFCL's multi-turn verdict on the per-turn, per-action call strings (`data.bfcl_multi_turn`).
    The checker keeps the backend instances it runs in its module's globals, named by model and
    entry, for the rest of the process: each verdict runs under a name of its own, and its instances
    are deleted after (BFCL evaluates an entry once a process; an RL run scores it many times)."""
    from bfcl_eval.eval_checker.multi_turn_eval import multi_turn_checker, multi_turn_utils

    model = f"agentic_rl_{uuid.uuid4().hex}"
    entry = {"id": task.meta["bfcl_id"], "initial_config": copy.deepcopy(task.meta["initial_config"]),
             "involved_classes": list(task.meta["involved_classes"])}
    try:
        return multi_turn_checker.multi_turn_checker(decoded, copy.deepcopy(task.answer), entry,
                                                     task.meta["category"], model)
    finally:
        state = vars(multi_turn_utils)
        for name in [k for k in state if k.startswith(model)]:
            del state[name]


def turn_actions(trajectory: Trajectory) -> list[list[list[tuple[str, dict]]]]:
    """Per user turn, per action, the calls an episode made: an action without a call attempt ends
    its user turn (the env then shows the next one)."""
    out: list[list[list[tuple[str, dict]]]] = [[]]
    for t in trajectory.turns:
        if t.tool_calls or t.malformed_calls:
            out[-1].append([(c.name, dict(c.arguments)) for c in t.tool_calls])
        else:
            out.append([])
    return out[:-1]


def episode_calls(trajectory: Trajectory) -> tuple[list[ToolCall], int]:
    """Every call the episode parsed, in order, and how many call attempts did not parse."""
    return [c for t in trajectory.turns for c in t.tool_calls], sum(t.malformed_calls for t in trajectory.turns)


@dataclass(frozen=True)
class BFCLVerifier:
    """1 when BFCL's checker accepts the episode's calls (`task.meta`: the entry's function docs and
    category; `task.answer`: its possible answer). A call that did not parse makes the answer
    undecodable, which BFCL scores wrong. Irrelevance entries (no possible answer) are right when the
    episode attempted no call at all — stricter than BFCL's relevance runner, which counts an
    undecodable call as no call (a policy would learn to write broken calls). Multi-turn entries
    (`later_turns` in meta): `multi_turn_checker` on the calls of each user turn."""

    def __call__(self, task: Task, trajectory: Trajectory) -> Score:
        if "later_turns" in task.meta:
            return self._multi_turn(task, trajectory)
        calls, malformed = episode_calls(trajectory)
        if task.answer is None:
            ok = not calls and not malformed
            return Score(float(ok), {"correct": float(ok), "calls": float(len(calls) + malformed)})
        if malformed:
            return Score(0.0, {"correct": 0.0, "undecodable": 1.0})
        verdict = check_calls(task.meta["functions"], calls, task.answer, task.meta["category"])
        ok = bool(verdict["valid"])
        return Score(float(ok), {"correct": float(ok), "calls": float(len(calls))})

    def _multi_turn(self, task: Task, trajectory: Trajectory) -> Score:
        """An episode that did not reach the end of its last user turn is BFCL's force-terminated
        entry: wrong. A call that did not parse is left out, as BFCL's decoder leaves it."""
        from agentic_rl.data.bfcl_multi_turn import per_turn_calls

        actions = turn_actions(trajectory)
        if not trajectory.terminated or len(actions) != len(task.answer):
            return Score(0.0, {"correct": 0.0, "unfinished": 1.0})
        ok = bool(check_multi_turn(task, per_turn_calls(actions))["valid"])
        return Score(float(ok), {"correct": float(ok), "calls": float(trajectory.num_tool_calls)})


@dataclass(frozen=True)
class CallFormat:
    """Well formed: the episode ended by itself and every call parsed and named a given function."""

    def __call__(self, task: Task, trajectory: Trajectory) -> Score:
        return Score(float(trajectory.terminated and trajectory.num_tool_errors == 0))
