"""What a calculator task template is: its wordings, how its numbers are drawn, how it is solved.

The template sets (`data/calculator.py`: train, held-out, RL-only; `data/calculator_fresh.py`: the
second held-out set) are built from these pieces.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from agentic_rl.tools.calculator import calculator

_RANGES = {  # number sizes per difficulty: how many digits the model would have to get right
    "count": {1: (3, 9), 2: (6, 30), 3: (12, 99)},
    "value": {1: (12, 99), 2: (25, 250), 3: (120, 999)},
    "big": {1: (100, 999), 2: (1000, 9999), 3: (10000, 99999)},
}
NAMES = ("Ana", "Ben", "Carla", "David", "Elena", "Farid", "Grace", "Hugo", "Iris", "Jonas", "Kemi", "Leo")
# A slot is drawn in order: a _RANGES kind, a tuple to choose from, or fn(values so far, rng, difficulty).
Slot = str | tuple | Callable[[dict, random.Random, int], Any]


@dataclass(frozen=True)
class Template:
    """One problem shape. `steps` are the calculator calls a demonstrator makes, in order; "{prev}" in a
    step is the calculator's output for the step before. `expression` is the one-call equivalent.
    `notes` are the per-step reasoning sentences of the demonstration (a tuple offers alternatives)."""

    id: str
    family: str
    wordings: tuple[str, ...]
    slots: Mapping[str, Slot]
    steps: tuple[str, ...]
    expression: str
    notes: tuple[str | tuple[str, ...], ...]

    def draw(self, rng: random.Random, difficulty: int, shared: float = 0.0) -> dict[str, Any]:
        """The slot values; with `shared` > 0 each number slot is, with that chance, one of the numbers
        `shared_digits` builds from the numbers drawn before it."""
        values: dict[str, Any] = {}
        for name, slot in self.slots.items():
            if isinstance(slot, str):
                low, high = _RANGES[slot][difficulty]
                options = shared_digits(values.values(), low, high) if shared and rng.random() < shared else []
                values[name] = rng.choice(options) if options else rng.randint(low, high)
            elif isinstance(slot, tuple):
                values[name] = rng.choice(slot)
            else:
                values[name] = slot(values, rng, difficulty)
        return values

    def solve(self, values: Mapping[str, Any]) -> tuple[list[str], int]:
        """The concrete calculator steps for these numbers, chained through the tool, and the answer."""
        steps, output = [], ""
        for fmt in self.steps:
            steps.append(fmt.format(**values, prev=output))
            output = calculator(steps[-1])
        if not output.lstrip("-").isdigit():
            raise ValueError(f"template {self.id} produced a non-integer answer {output!r} for {values}")
        return steps, int(output)


def shared_digits(earlier, low: int, high: int) -> list[int]:
    """The numbers in [low, high] that repeat digits the way a copy goes wrong: each earlier integer's
    prefixes and its extensions by its last digit (22 -> 2, 222, 2222), and repdigits (55, 999).
    A small model copying "222 km/h for 22 hours" writes `222 * 222`; these draws put such pairs in
    training, where an exact-answer reward tells the two apart."""
    out = {int(d * k) for d in "123456789" for k in range(1, 7)}
    for v in earlier:
        if isinstance(v, int) and v > 0:
            s = str(v)
            out |= {int(s[:k]) for k in range(1, len(s))} | {int(s + s[-1] * k) for k in range(1, 4)}
    return sorted(x for x in out if low <= x <= high)

def between(low_key: str, fraction: int = 5) -> Callable[[dict, random.Random, int], int]:
    """A draw in [value/fraction, value-1]: a part of another slot's quantity, so a remainder stays > 0."""
    return lambda v, rng, d: rng.randint(max(1, v[low_key] // fraction), v[low_key] - 1)


def product(*keys: str) -> Callable[[dict, random.Random, int], int]:
    return lambda v, rng, d: functools.reduce(lambda a, k: a * v[k], keys, 1)


def split_total(total: str) -> dict[str, Callable[[dict, random.Random, int], int]]:
    """Two parts `a` + `b` of an earlier-drawn total, neither below a quarter of it."""
    return {"a": lambda v, rng, d: rng.randint(v[total] // 4, 3 * v[total] // 4),
            "b": lambda v, rng, d: v[total] - v["a"]}


