"""The `tasks` env: a user's task file with a verifier and tools by name, through the real registry,
reward and conformance checks."""

from __future__ import annotations

import json

import pytest

from agentic_rl.envs.registry import resolve_env
from agentic_rl.errors import UnknownName, UserError
from agentic_rl.rollout.conformance import check_env
from agentic_rl.types import Trajectory, Turn

CALL = {"type": "function", "function": {"name": "calculator", "arguments": {"expression": "17 * 23"}}}
ROWS = [
    {"question": "What is 17 * 23?", "answer": "391",
     "demonstration": [{"role": "assistant", "content": "Let me compute.", "tool_calls": [CALL]},
                       {"role": "tool", "content": "999"},  # wrong in the file: the env's real tool answers
                       {"role": "assistant", "content": "<answer>391</answer>"}]},
    *({"question": f"What is {a} + {b}?", "answer": str(a + b), "demonstration": f"<answer>{a + b}</answer>"}
      for a, b in [(1, 2), (3, 4), (10, 20), (7, 8), (5, 5), (6, 9), (11, 12), (40, 2)]),
]


@pytest.fixture
def files(tmp_path):
    (tmp_path / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ROWS[:7]))
    (tmp_path / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ROWS[7:]))
    (tmp_path / "mine.py").write_text(
        "def shout(text: str) -> str:\n"
        '    """Say it louder.\n\n    Args:\n        text: what to say.\n    """\n'
        "    return text.upper()\n\n\n"
        "def last_word(task, trajectory):\n"
        "    from agentic_rl.rewards.base import Score\n"
        "    ok = float(trajectory.final_text.split()[-1] == str(task.answer))\n"
        "    return Score(ok, {'correct': ok})\n")
    return tmp_path


def _episode(task, text: str) -> Trajectory:
    return Trajectory(task=task, turns=(Turn((), (1,), (0.0,), text, "eos"),), terminated=True)


def test_files_verifier_and_tools_by_name(files):
    options = {"train": str(files / "train.jsonl"), "heldout": str(files / "test.jsonl"), "verifier": "numeric",
               "tools": ["calculator", f"{files / 'mine.py'}:shout"]}
    spec = resolve_env("tasks", options)
    train, held = spec.tasks("train", 10, 0), spec.tasks("heldout", 10, 0)
    assert len(train) == 10 and len({t.id for t in train}) == 7 and len(held) == 2
    env = spec.make_env(options)
    assert sorted(env.tools) == ["calculator", "shout"] and env.tools["shout"]("hi") == "HI"
    reward = spec.make_reward(options)
    task = held[0]
    right, wrong, bare = (reward(task, _episode(task, t)) for t in
                          (f"<answer>{task.answer}</answer>", "<answer>-1</answer>", "no tags"))
    assert (right.value, right.details["correct"]) == (1.0, 1.0)
    assert (wrong.value, wrong.details["correct"]) == (pytest.approx(0.1), 0.0)  # the gated format term
    assert (bare.value, bare.details["correct"]) == (0.0, 0.0)


def test_a_users_verifier_function_and_a_seeded_held_out_split(files):
    options = {"train": str(files / "train.jsonl"), "heldout_frac": 0.3, "verifier": f"{files / 'mine.py'}:last_word"}
    spec = resolve_env("tasks", options)
    held = spec.tasks("heldout", 10, 0)
    assert len(held) == 2 and all(t.meta["split"] == "heldout" for t in held)  # round(0.3 x 7) = 2
    assert not {t.prompt for t in held} & {t.prompt for t in spec.tasks("train", 50, 0)}
    task = held[0]
    assert spec.make_reward(options)(task, _episode(task, f"it is {task.answer}")).details["correct"] == 1.0


def test_a_demonstration_is_replayed_through_the_real_tools(files):
    options = {"train": str(files / "train.jsonl"), "heldout": str(files / "test.jsonl"), "tools": ["calculator"]}
    spec = resolve_env("tasks", options)
    task = next(t for t in spec.tasks("train", 7, 0) if t.answer == "391")
    demo = spec.demonstration(task, spec.make_env(options))
    assert [m["role"] for m in demo] == ["assistant", "tool", "assistant"] and demo[1]["content"] == "391"


def test_a_rows_messages_come_before_its_prompt(files):
    rows = [{"prompt": "2+2?", "answer": "4", "messages": [{"role": "system", "content": "Be terse."},
                                                           {"role": "user", "content": "1+1?"},
                                                           {"role": "assistant", "content": "<answer>2</answer>"}]},
            {"prompt": "3+3?", "answer": "6"}]
    (files / "m.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    options = {"train": str(files / "m.jsonl"), "heldout": str(files / "test.jsonl")}
    spec = resolve_env("tasks", options)
    env = spec.make_env(options)
    by_prompt = {t.prompt: t for t in spec.tasks("train", 2, 0)}
    assert [m["content"] for m in env.reset(by_prompt["2+2?"])] == ["Be terse.", "1+1?", "<answer>2</answer>", "2+2?"]
    assert env.reset(by_prompt["3+3?"])[0]["role"] == "system"  # the default system prompt


def test_mistakes_in_the_options_are_named(files):
    with pytest.raises(UserError, match="env.options.train: the tasks env needs a training file"):
        resolve_env("tasks", {"heldout": str(files / "test.jsonl")})
    with pytest.raises(UnknownName, match="unknown verifier 'maths'; known: exact_match, json_schema, math"):
        resolve_env("tasks", {"train": str(files / "train.jsonl"), "verifier": "maths"})
    options = {"train": str(files / "train.jsonl"), "heldout": str(files / "train.jsonl")}
    with pytest.raises(UserError, match="has a prompt that is also in training"):
        resolve_env("tasks", options)
    with pytest.raises(UserError, match="env.options.tools: cannot import 'no_such_module'"):
        resolve_env("tasks", {"train": str(files / "train.jsonl"), "heldout": str(files / "test.jsonl")}).make_env(
            {"tools": ["no_such_module:f"]})


def test_check_env_passes_on_a_task_file(files, tokenizer):
    options = {"train": str(files / "train.jsonl"), "heldout": str(files / "test.jsonl"), "verifier": "numeric",
               "tools": ["calculator"]}
    checks = check_env("tasks", tokenizer, options)
    assert all(c.passed for c in checks), [c for c in checks if not c.passed]


def test_the_fewshot_baseline_shows_two_training_demonstrations(files):
    options = {"train": str(files / "train.jsonl"), "heldout": str(files / "test.jsonl"), "tools": ["calculator"]}
    spec = resolve_env("tasks", options)
    task = spec.tasks("heldout", 1, 0)[0]
    plain, shown = spec.make_env(options).reset(task), spec.make_env({**options, "fewshot": True}).reset(task)
    extra = shown[1:-1]
    assert len(shown) > len(plain) and extra[0] == {"role": "user", "content": ROWS[0]["question"]}
    assert {"role": "tool", "name": "calculator", "content": "391"} in extra  # run for real, not the file's 999


@pytest.mark.slow
def test_the_tasks_recipe_trains_smollm2_end_to_end(tmp_path, monkeypatch):
    """recipes/tasks.yaml cut to a few minutes: baselines, SFT, one GRPO step and the held-out
    evaluation of every stage run on the user's files, verifier and tool, with the real model."""
    from pathlib import Path

    from agentic_rl.trainer.config import load_config
    from agentic_rl.trainer.loop import train

    monkeypatch.chdir(Path(__file__).resolve().parents[2])
    cfg = load_config("recipes/tasks.yaml", [f"output_dir={tmp_path}", "model.threads=1", "sft.examples=8",
                                             "sft.epochs=1", "rl.steps=1", "rl.tasks.per_step=2",
                                             "rl.tasks.group_size=4", "eval.tasks_per_split=8",
                                             "eval.batch_size=8", "model.memory_check=false"])
    results = train(cfg)
    assert set(results) >= {"base_zero_shot", "base_few_shot", "sft", "rl"}
    assert all(0 <= results[stage]["heldout"]["accuracy"] <= 1 for stage in ("base_zero_shot", "sft", "rl"))
    rl = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines() if '"stage": "rl"' in line]
    assert len(rl) == 1 and rl[0]["tokens_generated"] > 0
