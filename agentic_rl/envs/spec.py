"""`EnvSpec`: everything a recipe needs from an env, as one frozen record (the registry holds them)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from agentic_rl.envs.base import Env
from agentic_rl.rewards.base import RewardFn
from agentic_rl.types import Task


@dataclass(frozen=True)
class EnvSpec:
    """Everything a recipe needs from an env: episodes, the outcome reward, tasks and demonstrations.

    make_env(options) builds one env per episode; make_reward(options) the outcome reward;
    tasks(split, n, seed) draws tasks;
    demonstration(task, env) returns the messages after the user turn that solve it (for SFT), if
    known; `env` is a fresh instance whose tools produce the observations the demonstration shows.
    A recipe's env is `resolve_env(env.name, env.options)` (`envs/registry.py`), which binds a spec
    whose tasks depend on its options.
    hostile_actions(task, env), if given, are run by `check-env` as the generic hostile actions are.
    """

    name: str
    make_env: Callable[[Mapping[str, Any]], Env]
    make_reward: Callable[[Mapping[str, Any]], RewardFn]
    tasks: Callable[[str, int, int], list[Task]]
    splits: tuple[str, ...]
    demonstration: Callable[[Task, Env], list[dict]] | None = None
    options: tuple[str, ...] | None = None  # the env.options it reads ("fewshot" is always allowed); None: unchecked
    # actions that attack what this env holds (its files, its sandbox), for `check-env` beside the
    # generic hostile actions: hostile_actions(task, env) -> action texts in the env's protocol
    hostile_actions: Callable[[Task, Env], list[str]] | None = None
    # a spec whose tasks come from its options (a user's files, `tasks`): bind(options) is the spec
    # they make; `resolve_env(name, options)` applies it
    bind: Callable[[Mapping[str, Any]], EnvSpec] | None = None
    # every episode is one action (a reply the env scores and ends on, SkyRL's GSM8K): `check-env`
    # checks that the action ends the episode where it checks a multi-turn env's turn budget
    single_turn: bool = False

    def check_options(self, options: Mapping[str, Any]) -> None:
        """An option the env never reads is a typo the run would silently ignore: refuse it."""
        if self.options is None:
            return
        unknown = sorted(set(options) - {*self.options, "fewshot"})
        if unknown:
            raise KeyError(f"env.options.{unknown[0]}: env {self.name!r} has no such option; "
                           f"known: {', '.join(sorted(self.options))}")
