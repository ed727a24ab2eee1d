"""Partial rollouts (`rollout/partial.py`) on the tiny model: an episode paused at a round's turn
limit goes on under newer weights with the ids and logprobs it sampled kept, prefilled from exactly
the tokens it holds; the version span bound truncates; the last round ends every episode."""

from __future__ import annotations

import copy

import pytest
import torch

import agentic_rl.engines.hf as hf
from agentic_rl.engines.base import SamplingParams
from agentic_rl.envs.builtin import calculator
from agentic_rl.rollout.backends import Episodes
from agentic_rl.rollout.loop import Budget
from agentic_rl.rollout.partial import InFlight
from tests.rollout.long_tail_env import LongTailEnv, turns_of

PARAMS = SamplingParams(temperature=1.0, max_new_tokens=6)  # temperature 1: the logprobs `score` answers


def _how(max_turns: int = 8) -> Episodes:
    return Episodes(make_env=lambda: LongTailEnv(calculator.SPEC.make_env({})), reward=None, params=PARAMS,
                    budget=Budget(max_turns, 6, 6 * max_turns))


def _tasks(turns: int, n: int = 1):
    """`n` calculator tasks whose long-tail episodes take exactly `turns` turns."""
    out = [t for t in calculator.SPEC.tasks("train", 400, 0) if turns_of(t) == turns][:n]
    assert len(out) == n
    return out


def _prompts(monkeypatch) -> list[dict]:
    """Every session's prompts, as the engine is given them."""
    seen, run = [], hf.HFSession.run

    def recording(self, prompts, *args, **kwargs):
        seen.append({r: list(p) for r, p in prompts.items()})
        return run(self, prompts, *args, **kwargs)
    monkeypatch.setattr(hf.HFSession, "run", recording)
    return seen


def test_an_episode_sampled_under_two_versions_keeps_its_ids_and_logprobs(tiny, tokenizer, monkeypatch):
    """A 3-turn episode, one turn a pass: its first round (beside a 1-turn task, whose group ends
    it) takes turn 1 under version 0; the weights move by noise; its second round, its group alone,
    takes turns 2 and 3 under version 1 (a pass that ends no group is followed by another under
    the same weights). Turn 1's ids and logprobs are what round 1
    recorded; the second round's session is fed exactly the trajectory's tokens so far (the prompt,
    turn 1's action, its observation); and each turn's logprobs are the engine's own scores of those
    tokens under the version that sampled it, scored afresh (a full forward pass at temperature 1),
    not under the other version."""
    seen = _prompts(monkeypatch)
    engine = hf.HFEngine(tiny, tokenizer, precision="fp32")
    before = copy.deepcopy(tiny.state_dict())
    pool = InFlight(turns_per_version=1, max_versions=3)
    first = pool.round(engine, _how(), [*_tasks(3), *_tasks(1)], 1, seed=5, per_episode=True, final=False)
    assert len(first.groups) == 1 and first.carried == 1
    ep = pool.groups[0].episodes[0]
    turn1 = copy.deepcopy(ep.turns[0])
    with torch.no_grad():
        for p in tiny.parameters():
            p.add_(torch.randn(p.shape, generator=torch.Generator().manual_seed(1)) * 0.05)
    v1 = engine.sync_weights()
    second = pool.round(engine, _how(), [], 1, seed=6, per_episode=True, final=False)
    assert second.continued == 1 and len(second.groups) == 1 and second.span_cut == 0
    traj = second.groups[0].trajectories[0]
    assert len(traj.turns) == 3 and [t.version for t in traj.turns] == [0, v1, v1]
    assert traj.turns[0] == turn1  # ids, logprobs, observation: untouched by the later rounds
    first_turn = [*traj.turns[0].obs_ids, *traj.turns[0].action_ids]
    assert seen[1] == {0: [*first_turn, *traj.turns[1].obs_ids]}  # round 2 prefills exactly what the episode holds
    ids = traj.token_ids()
    under_v1 = engine.score(ids)
    tiny.load_state_dict(before)
    engine.sync_weights()
    under_v0 = engine.score(ids)
    for k, turn in enumerate(traj.turns):
        at = sum(len(t.obs_ids) + len(t.action_ids) for t in traj.turns[:k]) + len(turn.obs_ids)
        span = slice(at - 1, at - 1 + len(turn.action_ids))  # score[t - 1] is log p(ids[t] | ids[:t])
        own, other = (under_v0, under_v1) if turn.version == 0 else (under_v1, under_v0)
        # 1e-4: the sampler's cached, incremental decode against one full forward, both fp32
        torch.testing.assert_close(torch.tensor(turn.logprobs), own[span], atol=1e-4, rtol=0)
        assert (torch.tensor(turn.logprobs) - other[span]).abs().max() > 1e-2  # the versions do differ here


def test_an_episode_past_max_versions_ends_truncated(tiny, tokenizer):
    """max_versions 2, one turn a round: a 5-turn episode takes a turn in round 1, another in round
    2, and, having a third round ahead of it, ends there as truncated (counted): 2 turns, not 5.
    A 1-turn episode of the same round ends on its own, not cut."""
    engine = hf.HFEngine(tiny, tokenizer, precision="fp32")
    pool = InFlight(turns_per_version=1, max_versions=2)
    long, short = _tasks(5)[0], _tasks(1)[0]
    first = pool.round(engine, _how(), [long, short], 2, seed=1, per_episode=False, final=False)
    assert [g.task for g in first.groups] == [short] and first.carried == 1 and first.span_cut == 0
    second = pool.round(engine, _how(), [], 2, seed=2, per_episode=False, final=False)
    assert second.span_cut == 2 and second.carried == 0 and [g.task for g in second.groups] == [long]
    for traj in second.groups[0].trajectories:
        assert traj.truncated and not traj.terminated and len(traj.turns) == 2


@pytest.mark.parametrize("per_episode", [False, True])
def test_the_final_round_ends_every_episode_and_rounds_reproduce(tiny, tokenizer, per_episode):
    """Two tasks of 1 and 4 turns, two turns a round: round 1 ends the short group and carries the
    long one; the final round takes it to its end (4 turns) whatever the turn limit.
    The same rounds again give the same trajectories (which turn pauses depends on counts only)."""
    def rounds():
        engine = hf.HFEngine(tiny, tokenizer, precision="fp32")
        pool = InFlight(turns_per_version=2, max_versions=2)
        a = pool.round(engine, _how(), [*_tasks(1), *_tasks(4)], 2, seed=3, per_episode=per_episode, final=False)
        b = pool.round(engine, _how(), [], 2, seed=4, per_episode=per_episode, final=True)
        return a, b
    a, b = rounds()
    assert len(a.groups) == 1 and a.carried == 1 and b.carried == 0 and b.span_cut == 0
    assert [len(t.turns) for t in b.groups[0].trajectories] == [4, 4]
    a2, b2 = rounds()
    assert (a2.groups, b2.groups) == (a.groups, b.groups)
