"""Shared fixtures: the real SmolLM2 tokenizer and tiny random models built on it.

Model work in tests runs single-threaded: two torch threads on two cores collapse when anything
else runs, and the tiny models gain nothing from a second thread.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from agentic_rl.types import Task, Trajectory, TrajectoryGroup, Turn
from tests.device_guard import guard_device

torch.set_num_threads(1)
guard_device()  # before any backward: autograd sizes its per-device queues once, at its first use


@pytest.fixture(scope="session")
def tokenizer():
    from agentic_rl.models.loader import load_tokenizer

    return load_tokenizer("tiny")


@pytest.fixture
def tiny(tokenizer):
    from agentic_rl.models.loader import tiny_model

    model = tiny_model(tokenizer, seed=0)
    model.eval()
    return model


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
