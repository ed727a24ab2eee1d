"""Synthetic scored groups for trainer tests: real token ids and logprobs, no rollout needed."""

from __future__ import annotations

import pytest
import torch

from agentic_rl.types import Task, Trajectory, TrajectoryGroup, Turn


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
def make_group():
    return _group


def _group(task_id: int, rewards: list[float], gen: torch.Generator) -> TrajectoryGroup:
    prompt = tuple(range(10, 20))  # shared by the group, as a real prompt is
    trajs = []
    for r in rewards:
        action = tuple(int(x) for x in torch.randint(100, 5000, (6,), generator=gen))
        obs = tuple(int(x) for x in torch.randint(100, 5000, (3,), generator=gen))
        final = tuple(int(x) for x in torch.randint(100, 5000, (4,), generator=gen))
        turns = (Turn(prompt, action, (-1.0,) * 6, "a", "stop"), Turn(obs, final, (-1.0,) * 4, "b", "eos"))
        trajs.append(Trajectory(Task(str(task_id), "p"), turns, reward=r))
    return TrajectoryGroup(Task(str(task_id), "p"), tuple(trajs))
