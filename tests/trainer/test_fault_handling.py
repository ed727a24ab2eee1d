"""Faults at the scale of a training step, through `train()` on the tiny recipe: a step where every
episode failed on the machine's side stops the run with the evidence; a non-finite loss skips the
update (weights untouched) and `rl.max_bad_steps` of them in a row stop the run."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest
import torch

from agentic_rl.algorithms.losses import POLICY_LOSSES, LossOutputs
from agentic_rl.envs.registry import ENVS, get_env, register_env
from agentic_rl.trainer import loop
from agentic_rl.trainer.config import load_config
from agentic_rl.trainer.rl_loop import TrainingDiverged

TINY = ["sft.examples=0", "eval.baselines=false", "eval.tasks_per_split=2", "rl.steps=2"]


class _Broken:
    """An env whose every step raises (as a tool server that went down would)."""

    def __init__(self):
        self.inner = get_env("calculator").make_env({})
        self.format, self.tool_schemas = self.inner.format, self.inner.tool_schemas

    def reset(self, task):
        return self.inner.reset(task)

    def step(self, action):
        raise ConnectionError("tool server unreachable")


@pytest.fixture
def broken_env():
    register_env(dataclasses.replace(get_env("calculator"), name="broken-server", make_env=lambda options: _Broken()))
    yield "broken-server"
    ENVS.pop("broken-server", None)


def _rows(run_dir, stage):
    return [r for r in map(json.loads, (run_dir / "metrics.jsonl").read_text().splitlines()) if r["stage"] == stage]


def test_a_step_where_every_episode_failed_on_the_machines_side_stops_the_run(tmp_path, broken_env, snapshot):
    """Every step raises (a tool server down): nothing the policy did is left to train on, so the run
    stops at the first step with the kind and an example, and the weights are untouched."""
    from agentic_rl.trainer.rl_step import InfrastructureFailure

    cfg = load_config("recipes/tiny.yaml", [*TINY, f"env.name={broken_env}", f"output_dir={tmp_path}",
                                            "rl.algorithm.entropy_coef=0.01"])
    with pytest.raises(InfrastructureFailure, match="every episode .* failed on the machine's side.*env_step.*tool server unreachable"):
        loop.train(cfg)
    assert _rows(tmp_path, "rl") == []
    after = snapshot["model"].state_dict()  # the entropy bonus would have moved them, had a step run
    assert all(torch.equal(after[k], v) for k, v in snapshot["before"].items())


@pytest.fixture
def nan_loss():
    @POLICY_LOSSES.register("test-nan")
    def loss(x) -> LossOutputs:  # a loss that diverged: NaN on every trained token
        return LossOutputs(x.logprobs_BT * math.nan, {"clip_low_tokens": torch.tensor(0.0),
                                                      "clip_high_tokens": torch.tensor(0.0)})

    yield "test-nan"
    POLICY_LOSSES._items.pop("test-nan")


def test_nonfinite_updates_are_skipped_and_stop_the_run(tmp_path, nan_loss, snapshot):
    cfg = load_config("recipes/tiny.yaml", [*TINY, "rl.steps=6", "rl.max_bad_steps=3", f"rl.algorithm.policy_loss={nan_loss}",
                                            "rl.algorithm.entropy_coef=0.01", f"output_dir={tmp_path}"])
    with pytest.raises(TrainingDiverged, match="3 consecutive RL steps"):
        loop.train(cfg)
    rl = _rows(tmp_path, "rl")
    assert [r["step"] for r in rl] == [1, 2, 3]
    assert all(r["nonfinite_minibatches"] == 1 and r["optimizer_steps"] == 0 and r["loss"] is None for r in rl)
    events = [e for e in _rows(tmp_path, "event") if e.get("event") == "nonfinite_update_skipped"]
    assert [e["consecutive"] for e in events] == [1, 2, 3]
    after = snapshot["model"].state_dict()
    assert all(torch.equal(after[k], v) for k, v in snapshot["before"].items())
