"""Sokoban: generated levels are solvable and the solver's solution solves them in the env; illegal
moves are observations; two boxes; check-env through the rollout loop."""

from __future__ import annotations

from agentic_rl.envs.builtin.sokoban import generate, push, solve
from agentic_rl.envs.registry import get_env
from agentic_rl.rollout.conformance import check_env

SPEC = get_env("sokoban")


def _call(env, direction: str) -> str:
    message = {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {
        "name": "act", "arguments": {"direction": direction}}}]}
    return env.format.render_assistant_body(message)


def _replay(level, moves):
    boxes, player = level.boxes, level.player
    for m in moves:
        boxes, player = push(level, boxes, player, m)
    return boxes


def test_levels_are_seeded_unsolved_and_solved_by_the_solver():
    assert generate(4) == generate(4) and generate(4) != generate(5)
    for seed in range(60):
        for boxes in (1, 2):
            level = generate(seed, n_boxes=boxes)
            assert level.boxes != level.targets and len(level.boxes) == boxes
            moves = solve(level)
            assert _replay(level, moves) == level.targets
            # shortest: no prefix of it is a solution already
            assert all(_replay(level, moves[:k]) != level.targets for k in range(len(moves)))


def test_the_env_pays_one_for_a_solution_and_nothing_for_stopping():
    task = SPEC.tasks("heldout", 1, 0)[0]
    env = SPEC.make_env({})
    env.reset(task)
    for move in solve(env.level):
        result = env.step(_call(env, move))
    assert result.terminated and result.reward == 1.0 and not result.observation
    env.reset(task)
    stop = env.step("I am done.")
    assert stop.truncated and not stop.terminated and stop.reward == 0.0


def test_an_illegal_move_is_an_observation_and_moves_nothing():
    """Walk up until the wall (or a box against it) blocks, then try once more."""
    task = SPEC.tasks("train", 1, 3)[0]
    env = SPEC.make_env({})
    env.reset(task)
    for _ in range(10):
        if push(env.level, env.boxes, env.player, "up") is None:
            break
        env.step(_call(env, "up"))
    before = (env.boxes, env.player)
    result = env.step(_call(env, "up"))
    assert result.tool_errors == 1 and "cannot move up" in result.observation[0]["content"]
    assert (env.boxes, env.player) == before and not env.solved
    assert "no direction 'north'" in env.step(_call(env, "north")).observation[0]["content"]


def test_check_env_passes(tokenizer):
    checks = check_env("sokoban", tokenizer)
    assert all(c.passed for c in checks), [c for c in checks if not c.passed]
