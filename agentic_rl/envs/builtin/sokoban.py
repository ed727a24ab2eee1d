"""Sokoban: push every box onto a target (docs/envs/sokoban.md).

Levels are generated solvable: boxes start on their targets and the player pulls them away in
random reverse moves, so the level is the end of a walk that pushing reverses (as RAGEN and
gym-sokoban generate them). A breadth-first solver over (player, boxes) gives the shortest solution,
the demonstrations for SFT. The policy moves with `act(direction)`; a move into a wall, or a push of
a box into a wall or another box, is an illegal move: an error observation, nothing moves. Every box
on a target ends the episode with reward 1; the turn budget cuts it otherwise (reward 0).

Map: `#` wall, ` ` floor, `.` target, `$` box, `*` box on a target, `@` you, `+` you on a target.
Options: `size` (the room's inside, 5), `boxes` (1), `pulls` (how far the level is scrambled, 12),
`format` (hermes).
"""

from __future__ import annotations

import dataclasses
import random
from collections import deque
from collections.abc import Mapping
from typing import Any

from agentic_rl.envs.adapters.gymnasium import GymReturn
from agentic_rl.envs.base import StepResult, ToolEnv
from agentic_rl.envs.formats import get_format
from agentic_rl.envs.spec import EnvSpec
from agentic_rl.types import Task

MOVES = {"up": (-1, 0), "down": (1, 0), "left": (0, -1), "right": (0, 1)}
SPLIT_SEEDS = {"train": 0, "heldout": 1_000_000}
RULES = ("Push every box ($) onto a target (.). # is a wall, @ is you, * a box on a target, + you on a target. "
         "You push a box by walking into it; you cannot pull, and a box cannot move into a wall or another box.")
OPTIONS = ("size", "boxes", "pulls", "format")
Cell = tuple[int, int]


@dataclasses.dataclass(frozen=True)
class Level:
    walls: frozenset[Cell]
    targets: frozenset[Cell]
    boxes: frozenset[Cell]
    player: Cell
    size: int

    def render(self, boxes: frozenset[Cell] | None = None, player: Cell | None = None) -> str:
        boxes, player = self.boxes if boxes is None else boxes, player or self.player
        rows = []
        for r in range(self.size + 2):
            row = ""
            for c in range(self.size + 2):
                cell, on = (r, c), (r, c) in self.targets
                row += ("#" if cell in self.walls else ("+" if on else "@") if cell == player
                        else ("*" if on else "$") if cell in boxes else "." if on else " ")
            rows.append(row.rstrip())
        return "\n".join(rows)


def push(level: Level, boxes: frozenset[Cell], player: Cell, move: str) -> tuple[frozenset[Cell], Cell] | None:
    """The state after `move`, or None when it is illegal."""
    dr, dc = MOVES[move]
    nxt = (player[0] + dr, player[1] + dc)
    if nxt in level.walls:
        return None
    if nxt in boxes:
        beyond = (nxt[0] + dr, nxt[1] + dc)
        if beyond in level.walls or beyond in boxes:
            return None
        return (boxes - {nxt}) | {beyond}, nxt
    return boxes, nxt


def generate(seed: int, size: int = 5, n_boxes: int = 1, pulls: int = 12) -> Level:
    """A solvable level: boxes on targets, then `pulls` random reverse moves of the player."""
    rng = random.Random(f"sokoban/{seed}")
    walls = {(r, c) for r in range(size + 2) for c in range(size + 2) if r in (0, size + 1) or c in (0, size + 1)}
    inside = [(r, c) for r in range(2, size) for c in range(2, size)]  # targets off the walls' edge
    targets = frozenset(rng.sample(inside, n_boxes))
    free = [(r, c) for r in range(1, size + 1) for c in range(1, size + 1) if (r, c) not in targets]
    boxes, player = set(targets), rng.choice(free)
    for _ in range(pulls * 4):
        move = rng.choice(list(MOVES))
        dr, dc = MOVES[move]
        back = (player[0] - dr, player[1] - dc)  # the player steps back, pulling the box ahead of it
        ahead = (player[0] + dr, player[1] + dc)
        if back in walls or back in boxes:
            continue
        if ahead in boxes and rng.random() < 0.7:
            boxes = (boxes - {ahead}) | {player}
        player = back
    level = Level(frozenset(walls), targets, frozenset(boxes), player, size)
    return level if level.boxes != level.targets else generate(seed + 7_919, size, n_boxes, pulls)


def solve(level: Level, limit: int = 200_000) -> list[str]:
    """The shortest move sequence that puts every box on a target (breadth-first over states)."""
    start = (level.boxes, level.player)
    came: dict = {start: None}
    queue = deque([start])
    while queue and len(came) < limit:
        state = queue.popleft()
        if state[0] == level.targets:
            path = []
            while came[state] is not None:
                state, move = came[state]
                path.append(move)
            return path[::-1]
        for move in MOVES:
            nxt = push(level, state[0], state[1], move)
            if nxt is not None and nxt not in came:
                came[nxt] = (state, move)
                queue.append(nxt)
    raise ValueError("no solution found")  # generated levels always have one


class SokobanEnv(ToolEnv):
    def __init__(self, options: Mapping[str, Any]):
        self.options = options
        self.level: Level | None = None
        self.boxes, self.player, self.solved = frozenset(), (0, 0), False
        super().__init__([self.act], f"You play Sokoban. {RULES} Move by calling act with up, down, left or right.",
                         format=get_format(options.get("format", "hermes")))

    def reset(self, task: Task) -> list[dict]:
        self.level = level_of(task, self.options)
        self.boxes, self.player, self.solved = self.level.boxes, self.level.player, False
        messages = super().reset(task)
        return [*messages[:-1], {"role": "user", "content": f"{task.prompt}\n\n{self.level.render()}"}]

    def act(self, direction: str) -> str:
        """Move one cell (pushing a box ahead of you if there is one); returns the new map.

        Args:
            direction: up, down, left or right.
        """
        if direction not in MOVES:
            raise ValueError(f"no direction {direction!r}; use up, down, left or right")
        nxt = push(self.level, self.boxes, self.player, direction)
        if nxt is None:
            raise ValueError(f"you cannot move {direction}: a wall, or a box that cannot move, is in the way")
        self.boxes, self.player = nxt
        self.solved = self.boxes == self.level.targets
        return self.level.render(self.boxes, self.player) + ("\nEvery box is on a target." if self.solved else "")

    def step(self, action: str) -> StepResult:
        result = super().step(action)
        if self.solved:
            return dataclasses.replace(result, observation=(), reward=1.0, terminated=True)
        if result.terminated:  # stopped before solving: cut short, nothing won
            return dataclasses.replace(result, terminated=False, truncated=True)
        return result


def level_of(task: Task, options: Mapping[str, Any]) -> Level:
    return generate(int(task.meta["seed"]), int(options.get("size", 5)), int(options.get("boxes", 1)),
                    int(options.get("pulls", 12)))


def tasks(split: str, n: int, seed: int) -> list[Task]:
    base = SPLIT_SEEDS[split] + seed * 10_007
    return [Task(id=f"sokoban-{split}-{base + i}", prompt=f"Level {base + i}. {RULES}",
                 meta={"seed": base + i, "split": split}) for i in range(n)]


def demonstration(task: Task, env: SokobanEnv) -> list[dict]:
    """The solver's moves played in the real env; the last one solves it (nothing more to read)."""
    env.reset(task)
    out: list[dict] = []
    for move in solve(env.level):
        call = {"type": "function", "function": {"name": "act", "arguments": {"direction": move}}}
        seen = env.act(move)
        out += [{"role": "assistant", "content": f"I move {move}.", "tool_calls": [call]},
                *([] if env.solved else [{"role": "tool", "name": "act", "content": seen}])]
    return out


SPEC = EnvSpec(name="sokoban", make_env=SokobanEnv, make_reward=lambda options: GymReturn(1.0), tasks=tasks,
               splits=tuple(SPLIT_SEEDS), demonstration=demonstration, options=OPTIONS)
SPECS = (SPEC,)
