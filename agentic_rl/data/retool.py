"""ReTool tasks: procedural math from `reasoning-gym` that a small model solves by writing code.

The split is at the generator level, like the calculator's template split: TRAIN_FAMILIES are trained
on (and re-drawn from another seed stream for the in-distribution eval); HELDOUT_FAMILIES only appear
in the out-of-distribution eval, so it measures "write a program for a new kind of problem", not recall.

Demonstrations (the SFT cold start) are programs written from each generator's metadata, the way a
teacher would solve the problem: evaluate the expression, call math.gcd, search for the unknown.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import random
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from agentic_rl.types import Task

TRAIN_FAMILIES = ("basic_arithmetic", "chain_sum", "products", "gcd", "simple_equations")
HELDOUT_FAMILIES = ("lcm", "count_bits")
SPLITS = ("train", "heldout_in", "heldout_out")
_STREAM = {"train": 0, "heldout_in": 1, "heldout_out": 2}  # disjoint reasoning-gym seeds per split
_POOL = 64  # items per reasoning-gym dataset (one is built per seed block)


def make_tasks(n: int, seed: int, split: str) -> list[Task]:
    """n tasks, families interleaved uniformly at random; deterministic in (n, seed, split)."""
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; known: {', '.join(SPLITS)}")
    families = HELDOUT_FAMILIES if split == "heldout_out" else TRAIN_FAMILIES
    rng = random.Random(f"retool/{split}/{seed}")
    streams = {f: _items(f, split, seed) for f in families}
    tasks = []
    for i in range(n):
        family = rng.choice(families)
        item = next(streams[family])
        tasks.append(Task(
            id=f"retool-{split}-{seed}-{i}",
            prompt=item["question"],
            answer=str(item["answer"]),
            meta={"family": family, "split": split, **_public_meta(item["metadata"])},
        ))
    return tasks


def _items(family: str, split: str, seed: int) -> Iterator[Mapping[str, Any]]:
    """A family's items for this split. Train and heldout_in draw the same generators, so they are
    kept apart by a hash of the question: a tenth of all questions can only ever be held out, whatever
    seeds training uses."""
    for block in itertools.count():
        for item in _dataset(family, _STREAM[split] * 1_000_003 + seed * 1_009 + block):
            if split == "heldout_out" or (_bucket(item["question"]) == 0) == (split == "heldout_in"):
                yield item


def _bucket(question: str) -> int:
    return int(hashlib.sha256(question.encode()).hexdigest(), 16) % 10


@functools.lru_cache(maxsize=256)
def _dataset(family: str, rg_seed: int):
    import reasoning_gym

    return reasoning_gym.create_dataset(family, size=_POOL, seed=rg_seed)


def _public_meta(meta: Mapping[str, Any]) -> dict[str, Any]:
    keep = ("expression", "numbers", "equation", "variable", "number")
    return {k: meta[k] for k in keep if k in meta}


# ----------------------------------------------------------------------------- demonstrations
def _expression(meta) -> str:
    return f"print({meta['expression']})"


def _gcd(meta) -> str:
    return f"import math\nprint(math.gcd({', '.join(map(str, meta['numbers']))}))"


def _equation(meta) -> str:
    lhs, rhs = meta["equation"].split("=")
    v = meta["variable"]
    return f"for {v} in range(-100000, 100001):\n    if {lhs.strip()} == {rhs.strip()}:\n        print({v})"


PROGRAMS: dict[str, Callable[[Mapping[str, Any]], str]] = {
    "basic_arithmetic": _expression, "chain_sum": _expression, "products": _expression,
    "gcd": _gcd, "simple_equations": _equation,
}
_THOUGHTS = {
    "basic_arithmetic": "I will evaluate the expression with Python.",
    "chain_sum": "I will let Python add it up.",
    "products": "I will multiply with Python to avoid mistakes.",
    "gcd": "Python's math.gcd computes the greatest common divisor.",
    "simple_equations": "I will search for the integer that satisfies the equation.",
}


def demonstration_program(task: Task) -> str | None:
    program = PROGRAMS.get(task.meta.get("family", ""))
    return program(task.meta) if program else None


def demonstration(task: Task, run: Callable[[str], str]) -> list[dict]:
    """think, write code, read the interpreter's real output (`run` is the env's code tool), answer."""
    code = demonstration_program(task)
    if code is None:
        raise ValueError(f"no demonstration for family {task.meta.get('family')!r}")
    output = run(code)
    thought = _THOUGHTS[task.meta["family"]]
    return [
        {"role": "assistant", "content": f"<think>{thought}</think>",
         "tool_calls": [{"type": "function", "function": {"name": "python", "arguments": {"code": code}}}]},
        {"role": "tool", "name": "python", "content": output},
        {"role": "assistant",
         "content": f"<think>The interpreter printed {output.strip()}.</think>\n<answer>{task.answer}</answer>"},
    ]
