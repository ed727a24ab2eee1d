"""Synthetic scored groups for trainer tests: real token ids and logprobs, no rollout needed."""

from __future__ import annotations

from dataclasses import replace

import pytest

from agentic_rl.types import Trajectory, TrajectoryGroup


@pytest.fixture
def snapshot(monkeypatch):
    """Patches `loop.prepare` to keep the model and a copy of its weights before training."""
    from agentic_rl.trainer import loop

    taken = {}
    real_prepare = loop.prepare

    def prepare(cfg):
        model, tok, spec = real_prepare(cfg)
        taken["before"] = {k: v.detach().clone() for k, v in model.state_dict().items()}
        taken["model"] = model
        return model, tok, spec

    monkeypatch.setattr(loop, "prepare", prepare)
    return taken


@pytest.fixture
def with_questions():
    """Gives each group a prompt of 20 common tokens (a system prompt and tools, ids 10-29) then a
    question of its own, as every task of a real step has."""

    def rewrite(groups):
        out = []
        for i, g in enumerate(groups):
            prompt = (*range(10, 30), 300 + i, 400 + i, 500 + i)
            trajs = tuple(Trajectory(t.task, (replace(t.turns[0], obs_ids=prompt), *t.turns[1:]), reward=t.reward)
                          for t in g.trajectories)
            out.append(TrajectoryGroup(g.task, trajs))
        return out

    return rewrite
