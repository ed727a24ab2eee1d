"""Hindsight corrections through `train()`: attempted on each step's failures, verified, written
with their provenance, and trained on in the RL step's own optimizer update."""

from __future__ import annotations

import json

import torch

from agentic_rl.engines.scripted import ScriptedEngine
from agentic_rl.rollout import hindsight
from agentic_rl.tools.calculator import calculator
from agentic_rl.trainer import loop, rl_step
from agentic_rl.trainer.config import load_config


def test_verified_corrections_are_trained_on(tmp_path, tokenizer, monkeypatch, snapshot):
    """The tiny model fails every task. The teacher here is scripted to compute the right answer with
    the calculator (a real engine replaying text; the env, verifier, replay and training are the
    real ones; room for a whole tool call in the budgets): every
    attempt is verified, and the corrections alone move the weights (no group has reward spread,
    so plain GRPO would not update)."""
    def corrections(engine, tok, episodes, failed, *args, **kwargs):
        def script(row, turn):  # the reference expression through the calculator, then its result
            expr = failed[row].task.meta["expression"]
            if turn == 0:
                return f'<tool_call>\n{{"name": "calculator", "arguments": {{"expression": "{expr}"}}}}\n</tool_call>'
            return f"<answer>{calculator(expr)}</answer>{tok.eos_token}"

        return hindsight.hindsight_corrections(ScriptedEngine(tok, script), tok, episodes, failed, *args,
                                               **kwargs)

    monkeypatch.setattr(rl_step, "hindsight_corrections", corrections)
    cfg = load_config("recipes/tiny.yaml", [f"output_dir={tmp_path}", "sft.examples=0", "eval.baselines=false",
                                            "eval.tasks_per_split=2", "hindsight.coef=1.0", "hindsight.max_per_step=3",
                                            "rollout.max_new_tokens=48", "rollout.max_episode_tokens=128"])
    loop.train(cfg)
    rl = [r for r in map(json.loads, (tmp_path / "metrics.jsonl").read_text().splitlines()) if r["stage"] == "rl"]
    assert [(r["hindsight_attempts"], r["hindsight_verified"]) for r in rl] == [(3, 3), (3, 3)]
    assert all(r["optimizer_steps"] == 1 and r["hindsight_nll"] > 0 for r in rl)
    records = [json.loads(x) for x in (tmp_path / "trajectories" / "hindsight.jsonl").read_text().splitlines()]
    assert len(records) == 6 and all(r["meta"]["provenance"] == "hindsight" for r in records)
    after = snapshot["model"].state_dict()
    assert any(not torch.equal(after[k], v) for k, v in snapshot["before"].items())


def test_the_policy_itself_as_teacher_runs(tmp_path):
    """No teacher given: the policy, conditioned on the hint, attempts the corrections (the tiny
    random model writes none that verify; the step still trains or skips cleanly)."""
    cfg = load_config("recipes/tiny.yaml", [f"output_dir={tmp_path}", "sft.examples=0", "eval.baselines=false",
                                            "eval.tasks_per_split=2", "hindsight.coef=1.0", "hindsight.max_per_step=2"])
    loop.train(cfg)
    rl = [r for r in map(json.loads, (tmp_path / "metrics.jsonl").read_text().splitlines()) if r["stage"] == "rl"]
    assert [r["hindsight_attempts"] for r in rl] == [2, 2] and all(r["hindsight_verified"] == 0 for r in rl)


def test_the_demonstration_teacher_trains_through_train(tmp_path, snapshot):
    """`hindsight.teacher: demonstration`: each task with a failure (the tiny random model fails all)
    is corrected once, by the env's demonstration, and the corrections alone move the weights."""
    cfg = load_config("recipes/tiny.yaml", [f"output_dir={tmp_path}", "sft.examples=0", "eval.baselines=false",
                                            "eval.tasks_per_split=2", "hindsight.coef=1.0", "hindsight.max_per_step=4",
                                            "hindsight.teacher=demonstration"])
    loop.train(cfg)
    rl = [r for r in map(json.loads, (tmp_path / "metrics.jsonl").read_text().splitlines()) if r["stage"] == "rl"]
    # tiny: 2 tasks a step, so 2 attempts (one a task, under the limit of 4), both kept
    assert [(r["hindsight_attempts"], r["hindsight_verified"]) for r in rl] == [(2, 2), (2, 2)]
    assert all(r["hindsight_nll"] > 0 for r in rl)
    records = [json.loads(x) for x in (tmp_path / "trajectories" / "hindsight.jsonl").read_text().splitlines()]
    assert len(records) == 4 and {r["meta"]["hint"] for r in records} == {"demonstration"}
    after = snapshot["model"].state_dict()
    assert any(not torch.equal(after[k], v) for k, v in snapshot["before"].items())
