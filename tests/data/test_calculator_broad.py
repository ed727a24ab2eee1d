"""train_broad: the training templates' problems in more surface forms, each still solvable as
written and never one of the default eval's in-template problems."""

from __future__ import annotations

import random
from collections import Counter

from agentic_rl.data import calculator as calc_data
from agentic_rl.data.calculator import make_tasks
from agentic_rl.data.calculator_broad import broaden, solvable
from agentic_rl.tools import safe_eval


def test_every_broadened_problem_is_solvable_as_written_with_the_same_answer():
    tasks = make_tasks(600, seed=0, split="train_broad")
    for t in tasks:
        assert solvable(t.prompt, t.meta["expression"]), t.prompt
        assert safe_eval(t.meta["expression"]) == t.answer and t.meta["split"] == "train_broad"
    heldout = {(t.meta["template"], t.meta["expression"]) for t in make_tasks(calc_data.EXCLUDED_HELDOUT_TASKS,
                                                                              calc_data.EVAL_SEED, "heldout_in")}
    assert not {(t.meta["template"], t.meta["expression"]) for t in tasks} & heldout


def test_each_rewrite_occurs_and_most_word_problems_are_rewritten():
    """Over 600 draws of word problems (two sentences or more): each rewrite applies to at least a
    tenth of them; the question comes first in about half."""
    rng, seen, rewritten, n = random.Random(0), Counter(), 0, 0
    for t in make_tasks(600, seed=1, split="train"):
        if t.meta["family"] == "bare" or t.prompt.count(".") + t.prompt.count("?") < 2:
            continue
        text, applied = broaden(t.prompt, t.meta["expression"], rng)
        n, rewritten = n + 1, rewritten + bool(applied)
        seen.update(applied)
        assert (text != t.prompt) == bool(applied)
    assert n > 200 and rewritten / n > 0.8
    assert all(seen[k] / n > 0.1 for k in ("distractor", "question_first", "number_words", "synonym")), seen


def test_solvable_needs_every_number_of_the_expression():
    assert solvable("Ana buys seven mugs at 12 dollars each. How much?", "7 * 12")
    assert not solvable("Ana buys some mugs at 12 dollars each. How much?", "7 * 12")
    assert not solvable("Ana is 7 years old. She buys mugs at 21 dollars. How much?", "7 * 12")
