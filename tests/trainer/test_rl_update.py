"""rl_update on synthetic groups with a tiny model: the minibatch split, the zero-spread filter and
the behaviour-policy choice (ratio exactly 1 on the first minibatch)."""

from __future__ import annotations

import torch

from agentic_rl.trainer.config import load_config
from agentic_rl.trainer.rl import compute_advantages, rl_update, split_minibatches
from agentic_rl.types import Task, Trajectory, TrajectoryGroup, Turn


def test_split_minibatches_covers_every_group_once():
    for n in range(0, 9):
        for k in range(1, 5):
            parts = split_minibatches(n, k)
            assert [i for p in parts for i in p] == list(range(n))
            if n:
                assert len(parts) == min(k, n) and max(map(len, parts)) - min(map(len, parts)) <= 1


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


def _update(tiny, tokenizer, minibatches: int, rewards: list[list[float]]):
    cfg = load_config("recipes/tiny.yaml", [f"rl.minibatches={minibatches}", "rl.lr=1e-3"])
    gen = torch.Generator().manual_seed(0)
    groups = [_group(i, r, gen) for i, r in enumerate(rewards)]
    opt = torch.optim.AdamW(tiny.parameters(), lr=cfg.rl.lr)
    return rl_update(tiny, opt, groups, compute_advantages(groups, "grpo"), cfg, tokenizer.pad_token_id)


def test_minibatches_take_one_optimizer_step_each_and_skip_groups_without_spread(tiny, tokenizer):
    rewards = [[1.0, 0.0, 0.0, 1.0], [1.0, 1.0, 1.0, 1.0], [0.0, 1.0, 0.0, 0.0], [0.1, 1.0, 1.0, 0.1]]
    m = _update(tiny, tokenizer, 2, rewards)
    assert m["groups_trained"] == 3  # the all-equal group has zero advantage: dropped
    assert m["optimizer_steps"] == 2
    assert m["trained_tokens"] == 3 * 4 * 10  # 3 groups x 4 samples x (6 + 4) sampled tokens


def test_single_minibatch_is_on_policy(tiny, tokenizer):
    # One minibatch: the behaviour policy is the current one, so no token can be clipped.
    m = _update(tiny, tokenizer, 1, [[1.0, 0.0, 0.0, 1.0], [0.0, 1.0, 0.0, 0.0]])
    assert m["optimizer_steps"] == 1 and m["clip_frac"] == 0.0


def test_no_spread_anywhere_trains_nothing(tiny, tokenizer):
    before = {k: v.clone() for k, v in tiny.state_dict().items()}
    m = _update(tiny, tokenizer, 2, [[1.0] * 4, [0.0] * 4])
    assert m["optimizer_steps"] == 0 and m["trained_tokens"] == 0
    assert all(torch.equal(v, tiny.state_dict()[k]) for k, v in before.items())
