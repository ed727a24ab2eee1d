"""FrozenLake on random maps: gymnasium's own env through the Gymnasium adapter, each task a map of
its own (gymnasium's `generate_random_map`, seeded by the task), not slippery, so a solver gives
demonstrations (docs/envs/gymnasium.md#frozenlake).

The policy walks from S to G over frozen cells (F) without falling into a hole (H), one `act` call
per move; reaching G returns 1. Many turns an episode, and the credit of a move is only known at
the end: the multi-step credit problem RAGEN studies on the same game.
"""

from __future__ import annotations

from collections import deque

from agentic_rl.envs.adapters.gymnasium import GymEnv, gym_spec
from agentic_rl.types import Task

SIZE = 4
RULES = ("The map is a grid: S is the start, F frozen ice you can walk on, H a hole that ends the game, "
         "G the goal. [X] marks where you stand. Reach G.")
MOVES = {"left": (0, -1), "down": (1, 0), "right": (0, 1), "up": (-1, 0)}


def random_map(seed: int) -> list[str]:
    from gymnasium.envs.toy_text.frozen_lake import generate_random_map

    return generate_random_map(size=SIZE, p=0.8, seed=seed)


def shortest_path(desc: list[str], goal: str = "G") -> list[str]:
    """The moves of a shortest walk from S to the nearest `goal` cell over frozen ones (breadth-first)."""
    n = len(desc)
    start = next((r, c) for r in range(n) for c in range(n) if desc[r][c] == "S")
    came: dict = {start: None}
    queue = deque([start])
    while queue:
        cell = queue.popleft()
        if desc[cell[0]][cell[1]] == goal:
            path = []
            while came[cell] is not None:
                cell, move = came[cell]
                path.append(move)
            return path[::-1]
        for move, (dr, dc) in MOVES.items():
            nxt = (cell[0] + dr, cell[1] + dc)
            if 0 <= nxt[0] < n and 0 <= nxt[1] < n and nxt not in came and desc[nxt[0]][nxt[1]] in ("S", "F", goal):
                came[nxt] = (cell, move)
                queue.append(nxt)
    raise ValueError(f"no path to {goal}")  # generate_random_map only returns maps with a path to G


def demonstration(task: Task, env: GymEnv) -> list[dict]:
    """The solver's moves, each played in the real env (its renders are the observations); the move
    onto G ends the episode, with nothing more to read."""
    env.reset(task)
    out: list[dict] = []
    for move in shortest_path(random_map(int(task.meta["seed"]))):
        call = {"type": "function", "function": {"name": "act", "arguments": {"action": move}}}
        seen = env.act(move)
        out += [{"role": "assistant", "content": f"I move {move}.", "tool_calls": [call]},
                *([] if env.done else [{"role": "tool", "name": "act", "content": seen}])]
    return out


SPEC = gym_spec("FrozenLake-v1", make_kwargs=lambda seed: {"desc": random_map(seed), "is_slippery": False},
                prompt=f"Walk to the goal. {RULES}", demonstration=demonstration, name="frozen_lake")
SPECS = (SPEC,)
