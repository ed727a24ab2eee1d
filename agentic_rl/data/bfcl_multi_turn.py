"""BFCL's multi-turn base category as tasks, and its executable backends as an episode's state
(docs/envs/bfcl.md).

An entry is several user turns against one or two of BFCL's simulated APIs (a file system, a
trading bot, travel booking, messaging, vehicle control, ...), each loaded from the entry's
`initial_config`; its possible answer is, per user turn, the calls (Python call strings) that do
what the turn asks. The backends are bfcl-eval's own classes, constructed and loaded as its
`execute_multi_turn_func_call` does; a call is the method of that name with the call's arguments
(never an `eval` of model text).
"""

from __future__ import annotations

import ast
import copy
import functools
import importlib
import inspect
import json
import random
from collections.abc import Mapping, Sequence
from typing import Any

from agentic_rl.data.bfcl_tasks import read_data, tool_schema
from agentic_rl.types import Task

CATEGORY = "multi_turn_base"


@functools.cache
def _docs(class_name: str) -> tuple[dict, ...]:
    from bfcl_eval.constants.executable_backend_config import MULTI_TURN_FUNC_DOC_FILE_MAPPING

    return tuple(read_data(f"multi_turn_func_doc/{MULTI_TURN_FUNC_DOC_FILE_MAPPING[class_name]}"))


@functools.cache
def tasks() -> tuple[Task, ...]:
    """Every multi_turn_base entry, in BFCL's order."""
    answers = {a["id"]: a["ground_truth"] for a in read_data(f"possible_answer/BFCL_v4_{CATEGORY}.json")}
    out = []
    for e in read_data(f"BFCL_v4_{CATEGORY}.json"):
        excluded = set(e.get("excluded_function", ()))
        functions = [f for c in e["involved_classes"] for f in _docs(c) if f["name"] not in excluded]
        out.append(Task(id=f"bfcl-{e['id']}", prompt=e["question"][0][-1]["content"], answer=answers[e["id"]],
                        meta={"category": CATEGORY, "template": CATEGORY, "split": "multi_turn", "bfcl_id": e["id"],
                              "messages": e["question"][0], "later_turns": e["question"][1:],
                              "functions": functions, "tools": [tool_schema(f) for f in functions],
                              "initial_config": e["initial_config"], "involved_classes": e["involved_classes"]}))
    return tuple(out)


def make_tasks(n: int, seed: int) -> list[Task]:
    """`n` entries in a seeded order, going round again past the 200."""
    order = random.Random(f"bfcl/multi_turn/{seed}").sample(tasks(), len(tasks()))
    return [order[i % len(order)] for i in range(n)]


class Backends:
    """One episode's instances of the entry's API classes, loaded from its initial config."""

    def __init__(self, task: Task):
        from bfcl_eval.constants.executable_backend_config import CLASS_FILE_PATH_MAPPING, STATELESS_CLASSES

        self.methods: dict[str, Any] = {}
        allowed = {f["name"] for f in task.meta["functions"]}
        for name in task.meta["involved_classes"]:
            instance = getattr(importlib.import_module(CLASS_FILE_PATH_MAPPING[name]), name)()
            if name not in STATELESS_CLASSES:
                instance._load_scenario(copy.deepcopy(task.meta["initial_config"].get(name, {})), long_context=False)
            self.methods.update({m: getattr(instance, m) for m in dir(instance) if m in allowed})

    def call(self, name: str, arguments: Mapping[str, Any]) -> tuple[str, bool]:
        """The method's result as BFCL shows it (a dict as JSON), or its error; and whether it ran."""
        method = self.methods.get(name)
        if method is None:
            return f"Error: no function {name!r}; the functions are: {', '.join(sorted(self.methods))}", False
        try:
            result = method(**copy.deepcopy(dict(arguments)))
        except Exception as e:  # the model's bad arguments: BFCL's backends raise on them
            return f"Error during execution: {e}", False
        if isinstance(result, dict):
            try:
                return json.dumps(result), True
            except TypeError:
                return str(result), True
        return (result if isinstance(result, str) else str(result)), True

    def bind(self, call: str) -> tuple[str, dict]:
        """A possible answer's call string as (name, keyword arguments), positional ones bound by the
        method's signature; raises ValueError if an argument is not a literal."""
        node = ast.parse(call, mode="eval").body
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
            raise ValueError(f"not a call of a name: {call}")
        args = [ast.literal_eval(a) for a in node.args]
        kwargs = {k.arg: ast.literal_eval(k.value) for k in node.keywords}
        bound = inspect.signature(self.methods[node.func.id]).bind(*args, **kwargs)
        return node.func.id, dict(bound.arguments)


def call_string(name: str, arguments: Mapping[str, Any]) -> str | None:
    """A parsed call as the Python call string BFCL's multi-turn checker executes; None when it cannot
    be one (a name or key that is not an identifier), which BFCL's decoder would drop too."""
    if not name.isidentifier() or not all(isinstance(k, str) and k.isidentifier() for k in arguments):
        return None
    return f"{name}({', '.join(f'{k}={v!r}' for k, v in arguments.items())})"


def per_turn_calls(turn_actions: Sequence[Sequence[tuple[str, Mapping]]]) -> list[list[list[str]]]:
    """Per user turn, per action, the call strings (BFCL's decoded multi-turn result)."""
    out = []
    for actions in turn_actions:
        steps = [[s for s in (call_string(n, a) for n, a in calls) if s] for calls in actions]
        out.append([s for s in steps if s])
    return out
