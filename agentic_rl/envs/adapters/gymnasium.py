"""Any Gymnasium env whose observations render as text, as a multi-turn agent env
(`env: {name: "gym:FrozenLake-v1"}`; docs/envs/gymnasium.md).

The policy acts by calling the tool `act(action)` with one of the action names (Discrete action
spaces; `action_names` option, built in for gymnasium's toy-text envs); the gym env steps, and the
policy reads the new render (ANSI, or a `render: module:function` of the observation). The gym's
`terminated` ends the episode, its `truncated` (a TimeLimit) truncates it, and the episode's return
— the sum of the gym's rewards — is the outcome; `correct` is a return of at least `success` (1.0).
An unknown action name is an error observation (an illegal move), never a step. Tasks are the
env's own seeds: `train` seeds from 0, the `heldout` ones from 1,000,000 (`reset(seed=...)`), with
`make_kwargs(seed)` where an env is remade per task (FrozenLake's random maps).

Options: `action_names`, `render`, `success` (1.0), `kwargs` (for `gymnasium.make`), `describe` (the
rules, for the system prompt), `format` (hermes).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping
from typing import Any

from agentic_rl.envs.base import StepResult, ToolEnv
from agentic_rl.envs.formats import get_format
from agentic_rl.envs.spec import EnvSpec
from agentic_rl.registry import load_callable
from agentic_rl.rewards.base import Score
from agentic_rl.types import Task, Trajectory

ACTION_NAMES = {  # gymnasium's toy-text envs, in their action order
    "FrozenLake-v1": ("left", "down", "right", "up"), "FrozenLake8x8-v1": ("left", "down", "right", "up"),
    "CliffWalking-v1": ("up", "right", "down", "left"), "Taxi-v4": ("south", "north", "east", "west", "pickup", "dropoff"),
    "Blackjack-v1": ("stick", "hit"),
}
SPLIT_SEEDS = {"train": 0, "heldout": 1_000_000}
_COLORS = {"31": "red", "32": "green", "33": "yellow", "34": "blue", "35": "magenta", "36": "cyan"}
_ANSI = re.compile(r"\x1b\[([0-9;]*)m(.*?)\x1b\[0m", re.DOTALL)
OPTIONS = ("action_names", "render", "success", "kwargs", "describe", "format")


def ansi_text(text: str) -> str:
    """An ANSI render as plain text: a cell on a coloured background (the agent) as [X], one in a
    coloured font as {X:colour}; other escapes dropped."""
    def cell(m: re.Match) -> str:
        codes = m.group(1).split(";")
        if any(c.startswith("4") and len(c) == 2 for c in codes):
            return f"[{m.group(2)}]"
        color = next((_COLORS[c] for c in codes if c in _COLORS), None)
        return f"{{{m.group(2)}:{color}}}" if color else m.group(2)
    return re.sub(r"\x1b\[[0-9;]*m", "", _ANSI.sub(cell, text)).strip("\n")


class GymEnv(ToolEnv):
    """One episode of gym env `gym_id` (made per episode, reset with the task's seed)."""

    def __init__(self, gym_id: str, options: Mapping[str, Any], make_kwargs: Callable[[int], dict] | None = None):
        self.gym_id, self.make_kwargs = gym_id, make_kwargs
        self.names = tuple(options.get("action_names") or ACTION_NAMES.get(gym_id, ()))
        if not self.names:
            raise ValueError(f"{gym_id}: name its actions (env.options.action_names), one per Discrete action")
        self.render_fn = load_callable(options["render"], "env.options.render") if options.get("render") else None
        self.kwargs = dict(options.get("kwargs", {}))
        self.gym, self.done, self.total = None, False, 0.0
        system = (f"You play {gym_id}. {options.get('describe', '')} Act by calling act with one of: "
                  f"{', '.join(self.names)}. Each call is one move; the game answers with the new state.")
        super().__init__([self.act], " ".join(system.split()), format=get_format(options.get("format", "hermes")))

    def reset(self, task: Task) -> list[dict]:
        import gymnasium

        self.close()
        seed = int(task.meta["seed"])
        kwargs = {**self.kwargs, **(self.make_kwargs(seed) if self.make_kwargs else {})}
        mode = None if self.render_fn else "ansi"
        self.gym = gymnasium.make(self.gym_id, render_mode=mode, **kwargs)
        obs, _ = self.gym.reset(seed=seed)
        self.done, self.total, self.obs = False, 0.0, obs
        messages = super().reset(task)
        return [*messages[:-1], {"role": "user", "content": f"{task.prompt}\n\n{self.view()}"}]

    def view(self) -> str:
        return str(self.render_fn(self.obs)) if self.render_fn else ansi_text(self.gym.render())

    def act(self, action: str) -> str:
        """Make one move in the game; returns the new state.

        Args:
            action: the move's name.
        """
        if self.done:
            raise ValueError("the game is over")
        if action not in self.names:
            raise ValueError(f"no action {action!r}; the actions are: {', '.join(self.names)}")
        self.obs, reward, terminated, truncated, _ = self.gym.step(self.names.index(action))
        self.total += float(reward)
        self.done = "terminated" if terminated else "truncated" if truncated else False
        return self.view() + (f"\nThe game is over ({self.done}); return {self.total:g}." if self.done else "")

    def step(self, action: str) -> StepResult:
        result = super().step(action)
        if self.done:  # the game decides when the episode ends, not the policy's last message
            return dataclasses.replace(result, observation=(), reward=self.total, terminated=self.done == "terminated",
                                       truncated=self.done == "truncated")
        if result.terminated:  # the policy stopped before the game ended: the return so far, cut short
            return dataclasses.replace(result, reward=self.total, terminated=False, truncated=True)
        return result

    def close(self) -> None:
        if self.gym is not None:
            self.gym.close()
            self.gym = None


def episode_return(trajectory: Trajectory) -> float:
    """The gym's return: the env reports it on the step that ends the game."""
    return next((t.reward for t in reversed(trajectory.turns) if t.reward is not None), 0.0)


@dataclasses.dataclass(frozen=True)
class GymReturn:
    """The outcome is the gym's return; `correct` is a return of at least `success`."""

    success: float = 1.0

    def __call__(self, task: Task, trajectory: Trajectory) -> Score:
        ret = episode_return(trajectory)
        return Score(ret, {"return": ret, "correct": float(ret >= self.success)})


def gym_spec(gym_id: str, make_kwargs: Callable[[int], dict] | None = None, prompt: str = "",
             demonstration: Callable | None = None, name: str = "") -> EnvSpec:
    """The EnvSpec of gym env `gym_id`; its tasks are seeds."""
    def tasks(split: str, n: int, seed: int) -> list[Task]:
        base = SPLIT_SEEDS[split] + seed * 10_007
        return [Task(id=f"{gym_id}-{split}-{base + i}", prompt=f"Game {base + i}. {prompt or 'Play the game to its goal.'}",
                     meta={"seed": base + i, "split": split}) for i in range(n)]
    return EnvSpec(name=name or f"gym:{gym_id}", make_env=lambda options: GymEnv(gym_id, options, make_kwargs),
                   make_reward=lambda options: GymReturn(float(options.get("success", 1.0))), tasks=tasks,
                   splits=tuple(SPLIT_SEEDS), demonstration=demonstration, options=OPTIONS)
