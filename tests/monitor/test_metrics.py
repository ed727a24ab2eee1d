"""The six capability dimensions on hand-built episodes."""

from __future__ import annotations

import pytest
import torch

from agentic_rl.monitor.metrics import capabilities, reward_spread, rollout_metrics, tool_counts
from agentic_rl.types import Task, ToolCall, Trajectory, TrajectoryGroup, Turn

CALC = ToolCall("calculator", {"expression": "1+1"})


def _ep(first: str, calls: int, errors: int, correct: float, tokens: int = 10) -> Trajectory:
    turns = tuple(Turn((1,), (2,) * (tokens // (calls + 1)), (0.0,) * (tokens // (calls + 1)),
                       first if i == 0 else "x", "stop", tool_calls=(CALC,), tool_errors=int(i < errors))
                  for i in range(calls)) + (Turn((1,), (2,), (0.0,), "<answer>2</answer>", "eos"),)
    return Trajectory(Task("t", "q"), turns, reward=correct, reward_details={"correct": correct, "format": 1.0})


def test_capabilities():
    group = TrajectoryGroup(Task("t", "q"), (
        _ep("a", calls=2, errors=1, correct=1.0),  # two calls, one failed, solved: multi-step and self-correcting
        _ep("a", calls=2, errors=0, correct=0.0),  # two clean calls, wrong
        _ep("b", calls=1, errors=1, correct=0.0),  # one failed call, never recovered
        _ep("c", calls=0, errors=0, correct=1.0),  # answered directly
    ))
    cap = capabilities([group])
    assert cap["cap/tool_call_accuracy"] == pytest.approx(1 - 2 / 5)  # 5 calls, 2 failed
    assert cap["cap/multi_step_success"] == 0.5  # of the two episodes with >= 2 calls, one solved
    assert cap["cap/self_correction"] == 0.5  # of the two episodes with an error, one solved
    assert cap["cap/exploration"] == 0.75  # first actions a, a, b, c: 3 distinct of 4
    assert cap["cap/turns_per_solved"] == (3 + 3 + 2 + 1) / 2
    assert tool_counts(list(group.trajectories)) == {"tools/calculator": 5 / 4}


def test_per_turn_entropy_averages_to_the_mean_entropy(tiny, tokenizer, make_group):
    """Invariant: the token-weighted mean of the per-turn entropies is the step's mean entropy; the
    on-policy ratio is 1."""
    import torch

    from agentic_rl.trainer.config import load_config
    from tests.helpers import update

    cfg = load_config("recipes/tiny.yaml")
    groups = [make_group(0, [1.0, 0.0], torch.Generator().manual_seed(0))]
    opt = torch.optim.SGD(tiny.parameters(), lr=0.0)
    m = update(tiny, opt, groups, cfg, tokenizer.pad_token_id)
    turn_tokens = [6 * 2, 4 * 2]  # make_group: 6 sampled tokens in turn 0, 4 in turn 1, two samples
    weighted = sum(m[f"entropy_turn{k}"] * n for k, n in enumerate(turn_tokens)) / sum(turn_tokens)
    assert weighted == pytest.approx(m["entropy"], rel=1e-5)
    assert m["ratio_mean"] == pytest.approx(1.0) and m["ratio_max"] == pytest.approx(1.0)


def test_accuracy_by_template_averages_each_kind_over_its_groups():
    """Two bake_sell groups (1 of 2 right, then 2 of 2) and one share_equal group (0 of 2): bake_sell
    3 of 4 = 0.75, share_equal 0.0; a task with no template adds no key."""
    def group(template, *correct):
        task = Task(template or "x", "q", meta={"template": template} if template else {})
        return TrajectoryGroup(task, tuple(_ep("a", 1, 0, c) for c in correct))

    m = rollout_metrics([group("bake_sell", 1.0, 0.0), group("bake_sell", 1.0, 1.0), group("share_equal", 0.0, 0.0),
                         group(None, 1.0, 1.0)])
    assert {k: v for k, v in m.items() if k.startswith("accuracy_by_template/")} == {
        "accuracy_by_template/bake_sell": 0.75, "accuracy_by_template/share_equal": 0.0}


def test_the_reward_spread_the_monitor_reads_is_the_rows(make_group):
    """`reward_spread` (the collapse monitor's input) gives the metrics row its three reward figures;
    a group whose every episode the machine failed has no figure, and no episode at all, no spread."""
    gen = torch.Generator().manual_seed(0)
    groups = [make_group(0, [1.0, 0.0, 1.0], gen), make_group(1, [0.5, 0.5, 0.5], gen)]
    spread, row = reward_spread([*groups, TrajectoryGroup(Task("2", "p"), ())]), rollout_metrics(groups)
    assert (spread.mean, spread.std, spread.frac_zero_std_groups) == (
        row["reward_mean"], row["reward_std"], row["frac_zero_std_groups"])
    assert spread.mean == pytest.approx(3.5 / 6) and spread.frac_zero_std_groups == 0.5
    assert reward_spread([TrajectoryGroup(Task("2", "p"), ())]) is None
