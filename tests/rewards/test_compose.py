"""The recipe's `reward:` section (`rewards/compose.py`): the ToolRL rule for any weights the check
lets through (and a counterexample for every weighting it refuses), the composition against a
hand computation on the calculator env's real reward, group terms, and the empty section."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentic_rl.envs.registry import get_env
from agentic_rl.rewards.compose import (
    OUTCOME,
    REWARD_COMPONENTS,
    ComposedReward,
    check_reward,
    combine,
    composed_reward,
)
from agentic_rl.rewards.hacking import HACKING_DETECTORS
from agentic_rl.rewards.scoring import score_groups
from agentic_rl.trainer.episodes import episodes
from agentic_rl.trainer.reward_config import RewardConfig, RewardTermConfig
from agentic_rl.trainer.rollout_config import RolloutConfig
from agentic_rl.types import ToolCall, TrajectoryGroup

SHAPING = [n for n in REWARD_COMPONENTS.names() if n != OUTCOME]
DETECTORS = HACKING_DETECTORS.names()
CALL = (ToolCall("calculator", {"expression": "6*7"}),)


@st.composite
def sections(draw):
    """Any section a recipe may write with an outcome: shaping terms of any weight, each gated on any
    other term or on nothing, and penalties of any weight."""
    names = draw(st.lists(st.sampled_from(SHAPING), unique=True))
    weight = st.floats(0, 5, allow_nan=False)
    components = [RewardTermConfig(name=OUTCOME, weight=draw(st.floats(0.01, 5)))]
    for n in names:
        gate = draw(st.sampled_from(["", OUTCOME, *[m for m in names if m != n]]))
        components.append(RewardTermConfig(name=n, weight=draw(weight), gate=gate))
    penalties = [RewardTermConfig(name=p, weight=draw(weight)) for p in draw(st.lists(st.sampled_from(DETECTORS), unique=True))]
    return components, penalties


def _values(draw, components, penalties, outcome: float) -> dict[str, float]:
    values = {c.name: draw(st.floats(0, 1)) for c in components}
    values[OUTCOME] = outcome
    return values | {p.name: draw(st.sampled_from([0.0, 1.0])) for p in penalties}


@settings(max_examples=400, deadline=None)
@given(sections(), st.data())
def test_shaping_never_outweighs_a_correct_outcome_for_any_weights_the_check_allows(section, data):
    """Of two episodes with the same penalties, the solved one scores higher, whatever the shaping
    values of either; a weighting the check refuses has an episode pair where it does not."""
    components, penalties = section
    solved = _values(data.draw, components, penalties, 1.0)
    failed = {**_values(data.draw, components, penalties, 0.0), **{p.name: solved[p.name] for p in penalties}}
    try:
        check_reward(components, penalties)
    except ValueError as e:
        assert "ToolRL" in str(e) or "cycle" in str(e)
        if "cycle" in str(e):
            return
        # refused by the bound: every free term at 1 on a failed episode, at 0 on a solved one
        shaping = {c.name for c in components if c.name != OUTCOME}
        worst_failed = {**failed, **{n: 1.0 for n in shaping}}
        worst_solved = {**solved, **{n: 0.0 for n in shaping}}
        assert combine(worst_failed, components, penalties) >= combine(worst_solved, components, penalties)
        return
    assert combine(solved, components, penalties) > combine(failed, components, penalties)


def test_a_gate_chain_to_the_outcome_keeps_its_terms_out_of_a_failed_episode():
    """tool_match gated on format, format gated on outcome: on a failed episode neither pays, so
    both may weigh what they like; ungated, the same weights are refused."""
    chain = [RewardTermConfig(name=OUTCOME), RewardTermConfig(name="format", weight=3.0, gate=OUTCOME),
             RewardTermConfig(name="tool_match", weight=3.0, gate="format")]
    check_reward(chain, [])
    values = {OUTCOME: 0.0, "format": 1.0, "tool_match": 1.0}
    assert combine(values, chain, []) == 0.0
    assert combine({**values, OUTCOME: 1.0}, chain, []) == 7.0
    with pytest.raises(ValueError, match="ToolRL"):
        check_reward([chain[0], dataclasses.replace(chain[1], gate=""), chain[2]], [])


@pytest.mark.parametrize(("components", "penalties", "message"), [
    ([RewardTermConfig(name="outcme")], [], "unknown reward component 'outcme'; known: confidence, format"),
    ([RewardTermConfig(name=OUTCOME)], [RewardTermConfig(name="tool_hacking")], "known: format_gaming"),
    ([RewardTermConfig(name=OUTCOME), RewardTermConfig(name="format", gate="judge")], [], "is not another component"),
    ([RewardTermConfig(name=OUTCOME), RewardTermConfig(name="format", weight=-1)], [], "must be >= 0"),
    ([], [RewardTermConfig(name="format_gaming")], "name the components too"),
    ([RewardTermConfig(name=OUTCOME)], [RewardTermConfig(name="format_gaming", gate=OUTCOME)], "takes no gate"),
    ([RewardTermConfig(name="format", gate="tool_match"), RewardTermConfig(name="tool_match", gate="format")], [],
     "cycle"),
])
def test_the_check_names_what_is_wrong(components, penalties, message):
    with pytest.raises(ValueError, match=message):
        check_reward(components, penalties)


SECTION = RewardConfig(components=[RewardTermConfig(name=OUTCOME), RewardTermConfig(name="format", weight=0.1, gate=OUTCOME),
                                   RewardTermConfig(name="tool_match", weight=0.3)],
                       penalties=[RewardTermConfig(name="unused_tool_result", weight=0.5)])


def test_the_composition_on_the_calculator_reward_equals_a_hand_computation(episode):
    """The real calculator reward (NumericAnswerReward) as the outcome; values by hand:
    right, called the reference call, used its result: 1 + 0.1 + 0.3 * 1 - 0 = 1.4;
    right, called a wrong expression and ignored its result: 1 + 0.1 + 0.3 * (1 + 1 + 0) / 3 - 0.5 = 0.8;
    wrong, no call, tagged: 0 + 0 (format waits on the outcome) + 0.3 * 0 - 0 = 0."""
    reward = composed_reward(get_env("calculator").make_reward({}), SECTION.components, SECTION.penalties)
    meta = {"reference_calls": [{"name": "calculator", "arguments": {"expression": "6*7"}}]}
    used = episode("call", "6*7 = 42\n<answer>42</answer>", answer=42, observations=("42",), tool_calls=[CALL], meta=meta)
    other = (ToolCall("calculator", {"expression": "6*8"}),)
    ignored = episode("call", "<answer>42</answer>", answer=42, observations=("48",), tool_calls=[other], meta=meta)
    wrong = episode("<answer>41</answer>", answer=42, meta=meta)
    scores = [reward(t.task, t) for t in (used, ignored, wrong)]
    assert [s.value for s in scores] == pytest.approx([1.4, 0.8, 0.0], abs=1e-12)  # float sums of tenths
    assert [s.details["correct"] for s in scores] == [1.0, 1.0, 0.0]
    assert scores[1].details["tool_match"] == pytest.approx(2 / 3) and scores[1].details["unused_tool_result"] == 1.0
    assert scores[2].details["format"] == 1.0  # logged as it is, though it did not pay


def test_self_consistency_is_scored_over_the_group(episode):
    """Three of four episodes answer 7: they are the majority, whatever the answer key says."""
    section = [RewardTermConfig(name=OUTCOME), RewardTermConfig(name="self_consistency", weight=0.5)]
    reward = composed_reward(get_env("calculator").make_reward({}), section)
    trajs = [episode(f"<answer>{a}</answer>", answer=12) for a in (7, 7, 7, 12)]
    (group,) = score_groups(reward, [TrajectoryGroup(trajs[0].task, tuple(trajs))])
    assert [t.reward for t in group.trajectories] == [0.5, 0.5, 0.5, 1.0]
    assert [t.reward_details["self_consistency"] for t in group.trajectories] == [1.0, 1.0, 1.0, 0.0]


def test_no_section_is_the_envs_own_reward():
    spec = get_env("calculator")
    ep = episodes(spec, {}, RolloutConfig(), reward=RewardConfig())
    assert ep.reward == spec.make_reward({}) and not isinstance(ep.reward, ComposedReward)
    assert isinstance(episodes(spec, {}, RolloutConfig(), reward=SECTION).reward, ComposedReward)
