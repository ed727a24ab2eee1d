from __future__ import annotations

import random
import re
import time
from collections import Counter

import pytest

from agentic_rl.data import calculator as calc_data
from agentic_rl.data.calculator import (
    FRESH_TEMPLATES,
    HELDOUT_TEMPLATES,
    RL_TEMPLATES,
    TRAIN_SEED,
    TRAIN_TEMPLATES,
    make_tasks,
    shared_digits,
)
from agentic_rl.tools import calculator, safe_eval
from agentic_rl.types import Task

SPLITS = ("train", "heldout_in", "heldout_out", "rl_extra", "train_shared", "heldout_fresh")


def _words(wording: str) -> list[str]:
    """A wording's skeleton: lowercase words with every slot replaced by '#'."""
    return re.findall(r"[a-z#'-]+", re.sub(r"\{[^}]*\}", "#", wording.lower()))


def _ngrams(wording: str, n: int) -> set[tuple[str, ...]]:
    words = _words(wording)
    return {tuple(words[i : i + n]) for i in range(len(words) - n + 1)}


def _check_task(task: Task) -> None:
    steps = task.meta["steps"]
    outputs = [calculator(step) for step in steps]
    # Each later step is built from the calculator's printed result of the step before it.
    for output, next_step in zip(outputs, steps[1:], strict=False):
        assert re.search(rf"(?<![\d.]){re.escape(output)}(?![\d.])", next_step), (output, next_step)
    assert outputs[-1] == str(task.answer)
    assert task.meta["milestones"] == outputs[:-1]  # what the milestones process reward looks for
    assert safe_eval(task.meta["expression"]) == task.answer
    assert type(task.answer) is int
    assert task.answer >= 0
    assert "{" not in task.prompt and "}" not in task.prompt
    expected_steps = {"bare": 1, "one_step": 1, "two_step": 2}[task.meta["family"]]
    assert len(steps) == expected_steps


@pytest.mark.parametrize("split", SPLITS)
@pytest.mark.parametrize("difficulty", [None, 1, 2, 3])
def test_tasks_are_consistent(split: str, difficulty: int | None) -> None:
    tasks = make_tasks(150, seed=11, split=split, difficulty=difficulty)
    assert len(tasks) == 150
    for task in tasks:
        _check_task(task)
        assert task.meta["split"] == split
        if difficulty is not None:
            assert task.meta["difficulty"] == difficulty


@pytest.mark.parametrize("template", TRAIN_TEMPLATES + HELDOUT_TEMPLATES + RL_TEMPLATES, ids=lambda t: t.id)
def test_every_template_solves_exactly(template: calc_data.Template) -> None:
    # Invariant: every draw of every template at every difficulty has exact, non-negative integer steps,
    # and the one-call expression agrees with the chained steps.
    rng = random.Random(template.id)
    for difficulty in (1, 2, 3):
        for _ in range(100):
            values = template.draw(rng, difficulty)
            steps, answer = template.solve(values)
            assert answer >= 0
            assert safe_eval(template.expression.format(**values)) == answer
            assert len(steps) == len(template.steps)
            for wording in template.wordings:
                assert "{" not in wording.format(**values)


def test_determinism_and_prefix_stability() -> None:
    for split in SPLITS:
        first = make_tasks(60, seed=3, split=split)
        assert first == make_tasks(60, seed=3, split=split)
        assert make_tasks(25, seed=3, split=split) == first[:25]
        assert [t.prompt for t in make_tasks(60, seed=4, split=split)] != [t.prompt for t in first]


def test_same_seed_gives_different_streams_per_split() -> None:
    train = [t.prompt for t in make_tasks(50, seed=0, split="train")]
    heldout_in = [t.prompt for t in make_tasks(50, seed=0, split="heldout_in")]
    assert train != heldout_in


def test_task_fields() -> None:
    task = make_tasks(18, seed=0, split="heldout_out")[17]
    assert task.id == "calc-heldout_out-0-17"
    assert set(task.meta) >= {"template", "family", "split", "expression", "steps", "difficulty"}
    assert task.meta["template"] in {t.id for t in HELDOUT_TEMPLATES}


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="split"):
        make_tasks(1, seed=0, split="test")
    with pytest.raises(ValueError, match="difficulty"):
        make_tasks(1, seed=0, difficulty=4)


def test_template_split_is_disjoint() -> None:
    train_ids = {t.id for t in TRAIN_TEMPLATES}
    heldout_ids = {t.id for t in HELDOUT_TEMPLATES}
    assert not train_ids & heldout_ids
    assert len(train_ids) == len(TRAIN_TEMPLATES) and len(heldout_ids) == len(HELDOUT_TEMPLATES)
    train_words = [t for t in TRAIN_TEMPLATES if t.family != "bare"]
    assert 8 <= len(train_words) <= 12 and 8 <= len(HELDOUT_TEMPLATES) <= 12
    assert all(t.family != "bare" for t in HELDOUT_TEMPLATES)
    for family in ("one_step", "two_step"):
        assert sum(t.family == family for t in HELDOUT_TEMPLATES) >= 4
    assert all(len(t.wordings) >= 2 for t in train_words)  # wording variety against memorization


def test_heldout_wordings_share_no_skeleton_with_train() -> None:
    # Invariant: no held-out sentence pattern occurs in training. Compared on slot-normalized word
    # 4-grams, which rules out shared sentence skeletons while allowing incidental phrases ("there are #").
    train_grams = {g for t in TRAIN_TEMPLATES for w in t.wordings for g in _ngrams(w, 4)}
    train_skeletons = {tuple(_words(w)) for t in TRAIN_TEMPLATES for w in t.wordings}
    for template in HELDOUT_TEMPLATES:
        for wording in template.wordings:
            assert tuple(_words(wording)) not in train_skeletons
            shared = _ngrams(wording, 4) & train_grams
            assert not shared, (template.id, shared)


def test_rl_prompts_share_no_skeleton_with_heldout() -> None:
    # Invariant: the RL-only prompts (rl_extra) widen training without touching the out-of-template
    # eval: no RL template id, skeleton or word 4-gram of a held-out wording occurs among them.
    assert not {t.id for t in RL_TEMPLATES} & {t.id for t in TRAIN_TEMPLATES + HELDOUT_TEMPLATES}
    heldout_grams = {g for t in HELDOUT_TEMPLATES for w in t.wordings for g in _ngrams(w, 4)}
    for template in RL_TEMPLATES:
        assert len(template.wordings) >= 2
        for wording in template.wordings:
            shared = _ngrams(wording, 4) & heldout_grams
            assert not shared, (template.id, shared)


def test_the_fresh_held_out_set_shares_no_wording_with_any_other_set() -> None:
    # Invariant: the second held-out set measures transfer to wordings nobody tuned on, so no template
    # id, skeleton or slot-normalized word 4-gram of it occurs in the train, held-out or RL-only sets;
    # and it holds the surface forms it was written for (a question first, a distractor number).
    others = TRAIN_TEMPLATES + HELDOUT_TEMPLATES + RL_TEMPLATES
    assert not {t.id for t in FRESH_TEMPLATES} & {t.id for t in others}
    grams = {g for t in others for w in t.wordings for g in _ngrams(w, 4)}
    for template in FRESH_TEMPLATES:
        assert len(template.wordings) >= 2
        for wording in template.wordings:
            assert not _ngrams(wording, 4) & grams, (template.id, _ngrams(wording, 4) & grams)
    wordings = [w for t in FRESH_TEMPLATES for w in t.wordings]
    assert sum(w.split()[0] in ("How", "What", "Which", "By", "Per", "Find", "In", "Counting", "Cooking", "Walking")
               for w in wordings) >= 8
    unused = [t.id for t in FRESH_TEMPLATES if set(t.slots) - set(t.expression.replace("{", " ").replace("}", " ").split())
              - {"name", "total"} - {k for k in t.slots if callable(t.slots[k])}]
    assert {"museum_weekend", "phone_plan"} <= set(unused)  # a number in the text the answer does not use


def test_heldout_in_never_repeats_a_train_task() -> None:
    # Invariant: heldout_in measures new numbers on trained templates, so none of its problems may occur
    # among the first 20,000 default train tasks, in any wording.
    train = make_tasks(calc_data.EXCLUDED_TRAIN_TASKS, seed=TRAIN_SEED, split="train")
    train_prompts = {t.prompt for t in train}
    train_problems = {(t.meta["template"], t.meta["expression"]) for t in train}
    heldout = make_tasks(500, seed=1, split="heldout_in")
    assert not {t.prompt for t in heldout} & train_prompts
    assert not {(t.meta["template"], t.meta["expression"]) for t in heldout} & train_problems


def test_heldout_in_is_fast_from_a_cold_cache() -> None:
    calc_data._train_keys.cache_clear()
    start = time.perf_counter()
    make_tasks(200, seed=5, split="heldout_in")
    assert time.perf_counter() - start < 2.0


@pytest.mark.parametrize(
    ("split", "expected"),
    [
        ("train", {"bare": 0.3, "one_step": 0.4, "two_step": 0.3}),
        ("heldout_in", {"bare": 0.3, "one_step": 0.4, "two_step": 0.3}),
        ("heldout_out", {"one_step": 0.5, "two_step": 0.5}),
        ("rl_extra", {"one_step": 0.5, "two_step": 0.5}),
        ("train_shared", {"bare": 0.3, "one_step": 0.4, "two_step": 0.3}),
        ("heldout_fresh", {"one_step": 0.5, "two_step": 0.5}),
    ],
)
def test_family_mix(split: str, expected: dict[str, float]) -> None:
    counts = Counter(t.meta["family"] for t in make_tasks(1000, seed=2, split=split))
    assert set(counts) == set(expected)
    for family, share in expected.items():
        assert abs(counts[family] / 1000 - share) <= 0.03, counts


def test_templates_are_all_used() -> None:
    assert {t.meta["template"] for t in make_tasks(1000, seed=2)} == {t.id for t in TRAIN_TEMPLATES}
    heldout = make_tasks(1000, seed=2, split="heldout_out")
    assert {t.meta["template"] for t in heldout} == {t.id for t in HELDOUT_TEMPLATES}
    extra = make_tasks(1000, seed=2, split="rl_extra")
    assert {t.meta["template"] for t in extra} == {t.id for t in RL_TEMPLATES}
    shared = make_tasks(1000, seed=2, split="train_shared")
    assert {t.meta["template"] for t in shared} == {t.id for t in TRAIN_TEMPLATES}
    fresh = make_tasks(1000, seed=2, split="heldout_fresh")
    assert {t.meta["template"] for t in fresh} == {t.id for t in FRESH_TEMPLATES}


def test_shared_digits() -> None:
    # From 22 into [6, 30]: repdigits 6, 7, 8, 9, 11, 22; 22's prefix 2 is below 6 and its extensions
    # 222, 2222, 22222 above 30.
    assert shared_digits([22], 6, 30) == [6, 7, 8, 9, 11, 22]
    # From 222 into [25, 250]: repdigits 33..99 and 111, 222; prefixes 2 and 22 below 25.
    assert shared_digits([222], 25, 250) == [33, 44, 55, 66, 77, 88, 99, 111, 222]
    # From 57 into [3, 9]: repdigits 3..9 only; the prefix 5 is one of them, names are skipped.
    assert shared_digits([57, "Ana"], 3, 9) == [3, 4, 5, 6, 7, 8, 9]
    assert shared_digits([57], 500, 600) == [555, 577]  # repdigit 555, extension 577


def test_train_shared_repeats_digits_and_never_an_eval_problem() -> None:
    # Invariant: train_shared puts copy-prone number pairs into training, and since those pairs are
    # few it must exclude the default eval's in-template problems outright (in any wording).
    def repeats(task: Task) -> bool:
        numbers = re.findall(r"\d+", task.meta["expression"])
        return any(len(set(n)) == 1 and len(n) > 1 for n in numbers) or any(
            a != b and (a.startswith(b) or b.startswith(a)) for a in numbers for b in numbers)

    words = lambda split: [t for t in make_tasks(1000, seed=3, split=split) if t.meta["family"] != "bare"]  # noqa: E731
    share = lambda tasks: sum(map(repeats, tasks)) / len(tasks)  # noqa: E731
    assert share(words("train_shared")) > 0.5 > 0.15 > share(words("train"))
    evaluated = make_tasks(calc_data.EXCLUDED_HELDOUT_TASKS, seed=calc_data.EVAL_SEED, split="heldout_in")
    problems = {(t.meta["template"], t.meta["expression"]) for t in evaluated}
    drawn = make_tasks(3000, seed=3, split="train_shared")
    assert not {(t.meta["template"], t.meta["expression"]) for t in drawn} & problems


def test_difficulty_grows_the_numbers() -> None:
    def mean_digits(difficulty: int) -> float:
        numbers = [
            n for t in make_tasks(300, seed=9, difficulty=difficulty) for n in re.findall(r"\d+", t.prompt)
        ]
        return sum(map(len, numbers)) / len(numbers)

    assert mean_digits(1) < mean_digits(2) < mean_digits(3)


def test_baker_example() -> None:
    # The brief's example: 24 trays of 36 cookies, 415 sold -> 24 * 36 = 864, 864 - 415 = 449.
    template = calc_data.TEMPLATES_BY_ID["bake_sell"]
    steps, answer = template.solve({"trays": 24, "per": 36, "total": 864, "sold": 415})
    assert steps == ["24 * 36", "864 - 415"]
    assert answer == 449
