"""How a run makes and scores its episodes: the env factory, the reward (the env's own, recomposed by
the recipe's `reward` section for training), the sampling parameters and the budget, all from the
recipe's `env`, `reward` and `rollout` sections (and the options of hindsight corrections, from its
`hindsight` section)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from agentic_rl.engines.base import SamplingParams
from agentic_rl.envs.base import close_env
from agentic_rl.envs.spec import EnvSpec
from agentic_rl.rewards.compose import composed_reward
from agentic_rl.rewards.judge import JudgeComponent, make_judge
from agentic_rl.rollout.backends import Episodes
from agentic_rl.rollout.context import ContextPolicy
from agentic_rl.rollout.hindsight import HindsightOptions
from agentic_rl.rollout.loop import Budget
from agentic_rl.trainer.config import HindsightConfig
from agentic_rl.trainer.reward_config import JudgeConfig, RewardConfig
from agentic_rl.trainer.rollout_config import RolloutConfig
from agentic_rl.types import Task


def budget(ro: RolloutConfig, concurrent: bool = True) -> Budget:
    """The rollout section's limits; `concurrent` False decodes a whole batch at once (evaluation
    batches by `eval.batch_size` instead)."""
    c = ro.context
    context = (ContextPolicy(c.strategy, c.budget_tokens, c.keep_last, c.observation_chars)
               if c.strategy != "none" else None)
    return Budget(ro.max_turns, ro.max_new_tokens, ro.max_episode_tokens, ro.step_timeout_s,
                  ro.max_concurrent if concurrent else 0, context)


def stop_strings(spec: EnvSpec, options: Mapping[str, Any]) -> tuple[str, ...]:
    """Where an action ends, in the env's tool-call protocol."""
    env = spec.make_env(options)
    try:
        return env.format.stop_strings
    finally:
        close_env(env)


def episodes(spec: EnvSpec, options: Mapping[str, Any], ro: RolloutConfig, temperature: float | None = None,
             concurrent: bool = True, reward: RewardConfig | None = None, policy: str = "") -> Episodes:
    """Episodes of `spec` with `options`, sampled at the rollout's temperature (or `temperature`:
    0 is greedy), scored by the env's reward as the `reward` section composes it (None, or an empty
    section: the env's own; evaluation keeps it, and reads its `correct`). The section's judge is
    loaded here (`policy`: the model `reward.judge.model: policy` names, the run's start)."""
    params = SamplingParams(ro.temperature if temperature is None else temperature,
                            ro.top_p if temperature is None else 1.0, ro.max_new_tokens, stop_strings(spec, options))
    env_reward = spec.make_reward(options)
    judge = run_judge(reward.judge, policy) if reward is not None else None
    bound = {"judge": JudgeComponent(judge)} if judge is not None else {}
    scored_by = composed_reward(env_reward, reward.components, reward.penalties, bound) if reward else env_reward
    return Episodes(lambda: spec.make_env(options), scored_by, params, budget(ro, concurrent), judge)


def run_judge(j: JudgeConfig, policy: str):
    """The recipe's judge (None without one): frozen, cached, its model the run's start for `policy`."""
    if not (j.model or j.url):
        return None
    return make_judge(policy if j.model == "policy" else j.model, j.url, j.rubric, j.whole_episode,
                      j.max_new_tokens, j.timeout_s)


def hindsight_options(h: HindsightConfig, solution: Callable[[Task], str | None] | None = None) -> HindsightOptions:
    """The recipe's hindsight section as the rollout takes it (`solution`: the reference solution
    shown in the hint, `rollout.hindsight.reference_solutions`)."""
    return HindsightOptions(h.reveal_answer, solution, h.restart, h.grounded, h.min_reward)
