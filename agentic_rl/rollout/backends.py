"""Rollout backends: where a batch of episodes is sampled, behind one protocol.

A backend turns tasks into scored groups — `rollout(tasks, group_size, seed, episode_seeds,
progress)` — and hears of every weight sync (`sync`). Three ship: `InProcess` (this process's
engine, here), `RolloutWorkers` (Ray actors, `trainer/workers.py`) and `AgentRollouts` (an agent
program through the recording proxy, `rollout/agents.py`); `trainer/rollouts.py` chooses one from
the recipe, once, and the RL step's producer and the evaluation call it alike. docs/rollouts.md
shows a backend of one's own.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from agentic_rl.engines.base import SamplingParams
from agentic_rl.envs.base import Env
from agentic_rl.rewards.base import RewardFn
from agentic_rl.rewards.scoring import score_groups
from agentic_rl.rollout.loop import Budget, RolloutStats, rollout
from agentic_rl.rollout.partial import InFlight, RoundResult
from agentic_rl.types import Task, TrajectoryGroup

Progress = Callable[[int], object]  # called with the number of episodes that just ended


@dataclass(frozen=True)
class Episodes:
    """How a run makes and scores its episodes: the env factory, the outcome reward, the sampling
    parameters and the budget (`trainer/episodes.py` builds it from the recipe)."""

    make_env: Callable[[], Env]
    reward: RewardFn
    params: SamplingParams
    budget: Budget
    judge: object = None  # the run's LLM judge (`reward.judge`), for `rl.algorithm.process_reward: judge`


class Rollouts(Protocol):
    """What the RL step and the evaluation sample through."""

    def rollout(self, tasks: Sequence[Task], group_size: int, seed: int, episode_seeds: Sequence[int] | None = None,
                progress: Progress | None = None) -> tuple[list[TrajectoryGroup], RolloutStats]:
        """`group_size` episodes of each task, one scored group a task, in order. `seed` seeds the
        batch; `episode_seeds` (one per episode, task by task), when given, seed each episode's own
        generator (`rollout.rng: episode`), so it samples the same tokens wherever it runs;
        `progress(n)` hears of the episodes as they end."""
        ...

    def sync(self, model, version: int, probe) -> float | None:
        """The policy's engine holds `model`'s weights as `version` (checked by `probe`, None: no
        check): a backend with samplers of its own gives them the weights too and returns the
        probe's largest gap on them; one sampling through the policy's engine returns None."""
        ...

    def close(self) -> None:
        """Stop what the backend started (actors, a server)."""
        ...


class InProcess:
    """The episodes on the policy's own engine, in this process (`rollout/loop.py`), scored by the
    env's reward, within `reward_timeout_s` an episode (0: no limit)."""

    def __init__(self, engine, tokenizer, episodes: Episodes, reward_timeout_s: float):
        self.engine, self.tokenizer, self.episodes, self.reward_timeout_s = engine, tokenizer, episodes, reward_timeout_s

    def rollout(self, tasks: Sequence[Task], group_size: int, seed: int, episode_seeds: Sequence[int] | None = None,
                progress: Progress | None = None) -> tuple[list[TrajectoryGroup], RolloutStats]:
        ep = self.episodes
        groups, stats = rollout(self.engine, ep.make_env, tasks, group_size, ep.params, ep.budget,
                                seed=seed if episode_seeds is None else episode_seeds, progress=progress)
        return score_groups(ep.reward, groups, self.reward_timeout_s), stats

    def advance(self, pool: InFlight, tasks: Sequence[Task], group_size: int, seed: int, per_episode: bool,
                final: bool) -> RoundResult:
        """One round of partial rollouts (`rollout/partial.py`): the groups it ended, scored."""
        out = pool.round(self.engine, self.episodes, tasks, group_size, seed, per_episode, final)
        out.groups = score_groups(self.episodes.reward, out.groups, self.reward_timeout_s)
        return out

    def sync(self, model, version: int, probe) -> None:
        return None

    def close(self) -> None:
        pass
