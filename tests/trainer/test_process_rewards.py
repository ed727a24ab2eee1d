"""Process rewards reach per-token advantages exactly where the math says: a turn's reward is
centred within its task's group and credited to that turn's sampled tokens and every earlier turn's,
never to a later turn or an observation."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from agentic_rl.rewards.process import StepSignals, apply_process_rewards
from agentic_rl.trainer.config import load_config
from agentic_rl.trainer.credit import compute_credit
from agentic_rl.types import ToolCall


def test_a_failed_call_lowers_exactly_the_tokens_up_to_it(make_group):
    group = make_group(0, [1.0, 1.0], torch.Generator().manual_seed(0))  # equal outcomes: outcome advantage 0
    bad_first = dataclasses.replace(group.trajectories[0].turns[0], tool_errors=1)
    t0 = dataclasses.replace(group.trajectories[0], turns=(bad_first, group.trajectories[0].turns[1]))
    group = dataclasses.replace(group, trajectories=(t0, group.trajectories[1]))
    [scored] = apply_process_rewards(StepSignals(tool_error=-0.1), [group])
    assert [t.reward for t in scored.trajectories[0].turns] == [-0.1, 0.0]
    cfg = load_config("recipes/tiny.yaml", ["rl.algorithm.advantage=grpo"])
    adv = compute_credit([scored], cfg.rl.algorithm).advantages
    # Turn rewards of the group: [-0.1, 0] and [0, 0]; their mean -0.025 is subtracted ->
    # [-0.075, 0.025] and [0.025, 0.025]. Reward-to-go (gamma 1) over each row's turns:
    # row 0: turn 0 tokens -0.075 + 0.025 = -0.05, turn 1 tokens 0.025;
    # row 1: turn 0 tokens 0.025 + 0.025 = 0.05,   turn 1 tokens 0.025.
    expected = [(-0.05, 0.025), (0.05, 0.025)]
    for t, a, (first, second) in zip(scored.trajectories, adv, expected):
        p0, a0 = len(t.turns[0].obs_ids), len(t.turns[0].action_ids)
        o1, a1 = len(t.turns[1].obs_ids), len(t.turns[1].action_ids)
        assert torch.allclose(a[:p0], torch.zeros(p0))  # the prompt
        assert torch.allclose(a[p0 : p0 + a0], torch.full((a0,), first))
        assert torch.allclose(a[p0 + a0 : p0 + a0 + o1], torch.zeros(o1))  # the observation
        assert torch.allclose(a[p0 + a0 + o1 :], torch.full((a1,), second))


def test_step_signals():
    from agentic_rl.types import Task, Trajectory, Turn

    call = ToolCall("search", {"query": "x"})
    turns = (Turn((1,), (2,), (0.0,), "a", "stop", observation="Doc 1", tool_calls=(call,)),
             Turn((1,), (2,), (0.0,), "b", "stop", observation="No results.", tool_calls=(call,)),
             Turn((1,), (2,), (0.0,), "c", "stop", observation="Error: bad", tool_errors=1),
             Turn((1,), (2,), (0.0,), "<answer>x</answer>", "eos"))
    signals = StepSignals(tool_error=-0.1, repeated_call=-0.2, empty_result=-0.05)
    got = signals(Trajectory(Task("t", "q"), turns))
    assert got == [0.0, -0.2 - 0.05, -0.1, 0.0]  # repeat + empty; a failed call; a clean answer


@pytest.mark.parametrize("name", ["step_signals", "milestones", "step_signals+operands"])
def test_the_tiny_recipe_trains_with_a_process_reward(tmp_path, name):
    from agentic_rl.trainer import loop

    cfg = load_config("recipes/tiny.yaml", [f"output_dir={tmp_path}", "sft.examples=0", "eval.baselines=false",
                                            "eval.tasks_per_split=2", f"rl.algorithm.process_reward={name}",
                                            "rl.algorithm.entropy_coef=0.01"])
    loop.train(cfg)
    assert (tmp_path / "metrics.jsonl").read_text().count('"stage": "rl"') == 2


def test_milestones_pay_once_for_a_computed_intermediate():
    """Task 16*51/4: the reference passes through 816. Computing it pays `weight` on that turn;
    echoing 816 or writing it down pays nothing; a second computation pays nothing more."""
    from agentic_rl.rewards.process import Milestones
    from agentic_rl.types import Task, Trajectory, Turn

    task = Task("t", "16 bags of 51 apples, 4 shops", 204, meta={"milestones": ["816"]})

    def turn(action, obs=""):
        return Turn((1,), (2,), (0.0,), action, "stop", observation=obs)

    computed = (turn('calculator("16 * 51")', "816"), turn('calculator("16 * 51")', "816"),
                turn('calculator("816 / 4")', "204"), turn("<answer>204</answer>"))
    assert Milestones(weight=0.5)(Trajectory(task, computed)) == [0.5, 0.0, 0.0, 0.0]
    echoed = (turn('calculator("816")', "816"), turn("<answer>816</answer>"))
    assert Milestones(weight=0.5)(Trajectory(task, echoed)) == [0.0, 0.0]
    wrong = (turn('calculator("16 * 4")', "64"), turn("<answer>64</answer>"))
    assert Milestones(weight=0.5)(Trajectory(task, wrong)) == [0.0, 0.0]
    no_milestones = Task("u", "2+2", 4)
    assert Milestones()(Trajectory(no_milestones, computed)) == [0.0] * 4


def _calls(*steps):
    """Turns of an episode: (expression, observation) per call, then the answer turn."""
    from agentic_rl.types import Turn

    turns = [Turn((1,), (2,), (0.0,), f"call {e}", "stop", observation=obs,
                  tool_calls=(ToolCall("calculator", {"expression": e}),)) for e, obs in steps]
    return (*turns, Turn((1,), (2,), (0.0,), "<answer></answer>", "eos"))


def test_operands_flags_the_ungrounded_calls_of_a_word_problem():
    """Problem: 8 trays of 55 cookies, 171 sold (8 * 55 - 171 = 269). With unsourced = unused = -0.25:
    a call using a number the problem does not state, or one it states once used twice, costs -0.25
    on its turn; a stated number no call uses costs -0.25 on the last turn."""
    from agentic_rl.rewards.process import Operands
    from agentic_rl.types import Task, Trajectory

    task = Task("t", "A bakery bakes 55 cookies on each of 8 trays. 171 cookies are sold. How many remain?", 269)
    score = lambda *steps: Operands()(Trajectory(task, _calls(*steps)))  # noqa: E731
    assert score(("8 * 55 - 171", "269")) == [0.0, 0.0]  # the whole expression at once
    assert score(("8 * 55", "440"), ("440 - 171", "269")) == [0.0, 0.0, 0.0]  # a result feeds the next call
    assert score(("8 * 55 - 171 km", "Error: bad"), ("8 * 55 - 171", "269")) == [0.0, 0.0, 0.0]  # a retry
    assert score(("55 - 171", "-116")) == [0.0, -0.25]  # 8 left out
    assert score(("269", "269")) == [-0.25, -0.25]  # the answer guessed, then echoed: unsourced and unused
    assert score(("8 * 55 * 55 - 171", "24029")) == [-0.25, 0.0]  # 55 used for two
    assert score(("440 - 171", "269")) == [-0.25, -0.25]  # 8 * 55 done in the head: 440 unsourced, 8 and 55 unused
    assert score(("8.0 * 55 - 171", "269")) == [0.0, 0.0]  # 8.0 is 8
    assert Operands()(Trajectory(task, _calls()[-1:])) == [-0.25]  # no call at all: every number unused


def test_process_rewards_named_with_a_plus_add_turn_by_turn():
    from agentic_rl.rewards.process import Operands, StepSignals, process_reward
    from agentic_rl.types import Task, Trajectory

    task = Task("t", "What is 6 * 7?", 42)
    traj = Trajectory(task, _calls(("6 * 7", "42"), ("6 * 7", "42")))  # the second call repeats the first
    both = process_reward("step_signals+operands")(traj)
    assert both == [a + b for a, b in zip(StepSignals()(traj), Operands()(traj))] == [0.0, -0.1, 0.0]
    with pytest.raises(KeyError, match="unknown process reward 'prm'"):
        process_reward("operands+prm")
