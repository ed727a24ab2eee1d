"""BFCL's shipped questions and possible answers as tasks (bfcl-eval's `data/` files, read as the
JSON lines they are; docs/envs/bfcl.md).

A task is one BFCL entry: its question (the messages before the model's answer), its function docs
(BFCL's JSON, kept raw for BFCL's checker, and rendered as JSON-Schema tools for the prompt) and its
possible answer (`ground_truth`: per call, per parameter, the list of accepted values, "" meaning
the parameter may be left out; None for the irrelevance categories, where no call is right).

Entries BFCL's own checker cannot accept (their possible answer lacks a required parameter) are
left out. Splits are by question: a question whose text hashes into the first `HELDOUT_PERCENT` buckets is
held out in every category (BFCL's `multiple` reuses `simple` questions with more functions, so a
split by entry would leak), `train` and `heldout_in` draw from the training categories,
`heldout_out` from categories never trained on (parallel_multiple: calls of several functions at
once, where training saw several calls of one function and one call among several functions).
Draws go round the categories in a seeded order so that a large category (live_multiple, 1053
entries) does not drown a small one (live_parallel, 16).
"""

from __future__ import annotations

import copy
import functools
import hashlib
import json
import random
from collections.abc import Mapping, Sequence
from importlib import resources
from typing import Any

from agentic_rl.types import Task

SPLITS = ("train", "heldout_in", "heldout_out")
TRAIN_CATEGORIES = ("simple_python", "multiple", "parallel", "live_simple", "live_multiple", "live_parallel",
                    "irrelevance", "live_irrelevance")
OUT_CATEGORIES = ("parallel_multiple", "live_parallel_multiple")
IRRELEVANCE = ("irrelevance", "live_irrelevance")  # no possible answer: the right answer makes no call
HELDOUT_PERCENT = 20
VERSION = "BFCL_v4"

# BFCL's parameter types as JSON Schema ones: bfcl_eval.constants.type_mappings.GORILLA_TO_OPENAPI,
# for the Python categories (what BFCL's function-calling handlers send as tools)
_OPENAPI = {"integer": "integer", "number": "number", "float": "number", "string": "string", "boolean": "boolean",
            "bool": "boolean", "array": "array", "list": "array", "dict": "object", "object": "object",
            "tuple": "array", "any": "string"}


def read_data(relative: str) -> list[dict]:
    path = resources.files("bfcl_eval") / "data" / relative
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@functools.cache
def entries(category: str) -> tuple[dict, ...]:
    """A category's entries, each with its `ground_truth` (None for the irrelevance ones)."""
    questions = read_data(f"{VERSION}_{category}.json")
    if category in IRRELEVANCE:
        return tuple({**q, "ground_truth": None} for q in questions)
    answers = {a["id"]: a["ground_truth"] for a in read_data(f"possible_answer/{VERSION}_{category}.json")}
    return tuple({**q, "ground_truth": answers[q["id"]]} for q in questions)


def question_text(entry: Mapping) -> str:
    """The question the user asks: the last user message of the entry's (single) turn."""
    return [m["content"] for m in entry["question"][0] if m["role"] == "user"][-1]


def is_heldout(text: str) -> bool:
    return int(hashlib.sha256(text.encode()).hexdigest(), 16) % 100 < HELDOUT_PERCENT


def tool_schema(function: Mapping) -> dict:
    """A BFCL function doc as an OpenAI-style tool (as BFCL's function-calling handlers send it)."""
    fn = copy.deepcopy(dict(function))
    fn["parameters"] = {**fn["parameters"], "type": "object",
                        "properties": {k: _schema(v) for k, v in fn["parameters"].get("properties", {}).items()}}
    return {"type": "function", "function": fn}


def _schema(value: Mapping) -> dict:
    out = dict(value)
    kind = out.get("type", "string")
    out["type"] = _OPENAPI.get(kind, "string")
    if kind == "float":
        out["description"] = out.get("description", "") + " This is a float type value."
    if isinstance(out.get("properties"), Mapping):
        out["properties"] = {k: _schema(v) for k, v in out["properties"].items()}
    if isinstance(out.get("items"), Mapping):
        out["items"] = _schema(out["items"])
    return out


def pool(split: str, categories: Sequence[str]) -> dict[str, list[Task]]:
    """category -> the split's tasks of it, in BFCL's order."""
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; known: {', '.join(SPLITS)}")
    return {c: _pool(split, c) for c in categories}


@functools.cache
def _pool(split: str, category: str) -> list[Task]:
    train_texts = {question_text(e) for c in TRAIN_CATEGORIES for e in entries(c) if not is_heldout(question_text(e))}
    out = []
    for e in entries(category):
        text = question_text(e)
        keep = (not is_heldout(text) if split == "train" else is_heldout(text) if split == "heldout_in"
                else category in OUT_CATEGORIES and text not in train_texts)
        if keep and answerable(e, category):
            out.append(_task(e, category, split))
    return out


def answerable(entry: Mapping, category: str) -> bool:
    """An irrelevance entry, or one whose possible answer BFCL's own checker accepts (5 of BFCL v4's
    single-turn entries are not: a required parameter the possible answer lacks, docs/envs/bfcl.md)."""
    if entry["ground_truth"] is None:
        return True
    from agentic_rl.rewards.bfcl import check_calls
    from agentic_rl.types import ToolCall

    calls = [ToolCall(name, args) for name, args in first_answer(entry["ground_truth"], entry["function"])]
    return bool(check_calls(entry["function"], calls, entry["ground_truth"], category)["valid"])


def _task(entry: Mapping, category: str, split: str) -> Task:
    return Task(id=f"bfcl-{entry['id']}", prompt=question_text(entry), answer=entry["ground_truth"],
                meta={"category": category, "template": category, "split": split, "bfcl_id": entry["id"],
                      "messages": entry["question"][0], "functions": entry["function"],
                      "tools": [tool_schema(f) for f in entry["function"]]})


def make_tasks(n: int, seed: int, split: str, categories: Sequence[str] | None = None) -> list[Task]:
    """`n` tasks of `split`: the categories in a seeded order, one task of each in turn, each
    category's tasks in a seeded order, going round again when a category runs out. `categories`:
    the training categories to draw `train` and `heldout_in` from (all by default); `heldout_out`
    draws from `OUT_CATEGORIES`."""
    categories = OUT_CATEGORIES if split == "heldout_out" else tuple(categories or TRAIN_CATEGORIES)
    by_category = {c: ts for c, ts in pool(split, categories).items() if ts}
    if not by_category:
        raise ValueError(f"split {split!r} holds no task of {', '.join(categories)}")
    rng = random.Random(f"bfcl/{split}/{seed}")
    orders = {c: rng.sample(ts, len(ts)) for c, ts in sorted(by_category.items())}
    names = rng.sample(sorted(orders), len(orders))
    return [orders[c][(i // len(names)) % len(orders[c])] for i, c in
            ((i, names[i % len(names)]) for i in range(n))]


def first_answer(ground_truth: Sequence[Mapping[str, Mapping[str, Any]]], functions: Sequence[Mapping]
                 ) -> list[tuple[str, dict]]:
    """One answer from a possible answer: per call, each parameter's first accepted value, and a
    parameter left out where leaving it out is accepted ("" among its values) and it is optional."""
    required = {f["name"]: set(f["parameters"].get("required", ())) for f in functions}
    return [(name, _choose(params, required.get(name, set()))) for call in ground_truth for name, params in call.items()]


def _choose(params: Mapping[str, Any], required: set[str] = frozenset()) -> dict:
    out = {}
    for key, choices in params.items():
        if not isinstance(choices, list):  # a nested dict may give one value, not a list of them
            out[key] = choices
            continue
        given = [c for c in choices if c != ""]
        if given and (key in required or "" not in choices):
            out[key] = _value(given[0])
    return out


def _value(value: Any) -> Any:
    """A possible answer's dict holds accepted values per key, as a parameter does; lists may hold such dicts."""
    if isinstance(value, dict):
        return _choose(value)
    if isinstance(value, list):
        return [_value(v) if isinstance(v, dict) else v for v in value]
    return value
