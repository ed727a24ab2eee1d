"""The Gymnasium adapter on gymnasium's own toy-text envs: the return, termination and truncation
equal what the gym itself gives for the same seed and moves; an illegal move is an observation; a
user's render function; FrozenLake's solver demonstrations; check-env through the rollout loop."""

from __future__ import annotations

import random

import gymnasium
import pytest

from agentic_rl.envs.adapters.gymnasium import ACTION_NAMES, ansi_text, episode_return
from agentic_rl.envs.registry import get_env
from agentic_rl.rollout.conformance import check_env


def _call(env, name: str) -> str:
    message = {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {
        "name": "act", "arguments": {"action": name}}}]}
    return env.format.render_assistant_body(message)


def test_ansi_renders_read_as_text():
    assert ansi_text("\x1b[41mS\x1b[0mFF\nFH") == "[S]FF\nFH"  # the agent, on a coloured background
    assert ansi_text("|\x1b[35mR\x1b[0m: |\x1b[34;1mB\x1b[0m|") == "|{R:magenta}: |{B:blue}|"


@pytest.mark.parametrize("gym_id", ["Taxi-v4", "CliffWalking-v1", "FrozenLake-v1"])
def test_return_termination_and_truncation_equal_the_gyms_own(gym_id):
    """Random moves through our env and through gymnasium directly, same seed: the same rewards
    summed, and the episode ends the same way at the same move (a TimeLimit of 12 moves truncates)."""
    spec = get_env(f"gym:{gym_id}")
    for task in spec.tasks("train", 3, 0):
        ours = spec.make_env({"kwargs": {"max_episode_steps": 12}})
        ours.reset(task)
        theirs = gymnasium.make(gym_id, max_episode_steps=12)
        theirs.reset(seed=task.meta["seed"])
        rng, total = random.Random(task.meta["seed"]), 0.0
        for _ in range(40):
            move = rng.randrange(len(ACTION_NAMES[gym_id]))
            result = ours.step(_call(ours, ACTION_NAMES[gym_id][move]))
            _, reward, terminated, truncated, _ = theirs.step(move)
            total += reward
            assert (result.terminated, result.truncated) == (terminated, truncated)
            if terminated or truncated:
                assert result.reward == pytest.approx(total) and not result.observation
                break
        ours.close()


def test_an_illegal_move_is_an_observation_and_stopping_early_is_a_truncation():
    spec = get_env("frozen_lake")
    task = spec.tasks("train", 1, 0)[0]
    env = spec.make_env({})
    first = env.reset(task)[-1]["content"]
    result = env.step(_call(env, "jump"))
    assert result.tool_errors == 1 and "no action 'jump'" in result.observation[0]["content"]
    assert env.view() in first  # nothing moved
    stop = env.step("I give up.")
    assert stop.truncated and not stop.terminated and stop.reward == 0.0


def test_frozen_lake_demonstrations_reach_the_goal_and_a_hole_ends_with_nothing():
    from agentic_rl.envs.builtin.frozen_lake import random_map, shortest_path

    spec = get_env("frozen_lake")
    tasks = spec.tasks("heldout", 6, 0)
    assert len({tuple(random_map(t.meta["seed"])) for t in tasks}) >= 5  # a map per task
    for task in tasks:
        env = spec.make_env({})
        env.reset(task)
        for move in shortest_path(random_map(task.meta["seed"])):
            result = env.step(_call(env, move))
        assert result.terminated and result.reward == 1.0
        env = spec.make_env({})
        env.reset(task)
        for move in shortest_path(random_map(task.meta["seed"]), goal="H"):  # every map has a hole
            result = env.step(_call(env, move))
        assert result.terminated and result.reward == 0.0 and not result.observation


def test_a_users_render_function_makes_a_gym_without_ansi_playable(tmp_path):
    (tmp_path / "render.py").write_text("def blackjack(obs):\n    me, dealer, ace = obs\n"
                                        "    return f'your sum {me}, dealer shows {dealer}, usable ace {bool(ace)}'\n")
    spec = get_env("gym:Blackjack-v1")
    env = spec.make_env({"render": f"{tmp_path / 'render.py'}:blackjack"})
    task = spec.tasks("train", 1, 0)[0]
    assert "dealer shows" in env.reset(task)[-1]["content"]
    result = env.step(_call(env, "stick"))
    assert result.terminated and result.reward in (-1.0, 0.0, 1.0)


@pytest.mark.parametrize("name", ["frozen_lake", "gym:Taxi-v4"])
def test_check_env_passes(name, tokenizer):
    checks = check_env(name, tokenizer)
    assert all(c.passed for c in checks), [c for c in checks if not c.passed]


def test_the_return_is_read_from_the_step_that_ends_the_game():
    from agentic_rl.types import Trajectory, Turn

    turns = (Turn((), (1,), (0.0,), "a", "stop", reward=None), Turn((), (2,), (0.0,), "b", "stop", reward=-13.0))
    assert episode_return(Trajectory(task=None, turns=turns)) == -13.0
