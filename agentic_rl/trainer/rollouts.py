"""The rollout backend (`rollout/backends.py`) a run samples through, chosen once from the recipe:
a class of the user's own (`rollout.backend`, docs/rollouts.md), Ray workers (`rollout.workers`, for
the RL steps: evaluation samples on this process's engine; each worker runs the agent program when
the recipe has one), an agent program through the recording proxy (`rollout.agent`), or this
process's engine.

Every backend is built from one `RolloutSetting`; the RL loop builds the steps' (`rl_loop.py`),
the evaluation its own (`evaluate.py`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from agentic_rl.registry import Registry, load_callable
from agentic_rl.rollout.agents import AgentRollouts, load_agent
from agentic_rl.rollout.backends import Episodes, InProcess, Rollouts
from agentic_rl.trainer.config import Config
from agentic_rl.trainer.workers import RolloutWorkers


@dataclass(frozen=True, kw_only=True)
class RolloutSetting:
    """What a backend is built from."""

    cfg: Config
    engine: object  # the policy's sampler
    tokenizer: object
    episodes: Episodes  # the env, the reward, the sampling parameters and the budget
    evaluation: bool = False  # a held-out evaluation's episodes (batches of eval.batch_size), not an RL step's


BACKENDS: Registry[Callable[[RolloutSetting], Rollouts]] = Registry("rollout backend")


@BACKENDS.register("in_process")
def _in_process(s: RolloutSetting) -> InProcess:
    # an RL step's rewards are held to the env step's deadline; the evaluation's are not held
    return InProcess(s.engine, s.tokenizer, s.episodes, 0.0 if s.evaluation else s.episodes.budget.step_timeout_s)


@BACKENDS.register("workers")
def _workers(s: RolloutSetting) -> RolloutWorkers:
    return RolloutWorkers(s.cfg, s.episodes)


@BACKENDS.register("agent")
def _agent(s: RolloutSetting) -> AgentRollouts:
    ro = s.cfg.rollout
    concurrency, label = (s.cfg.eval.batch_size, "eval") if s.evaluation else (ro.agent.concurrency, "s")
    return AgentRollouts(load_agent(ro.agent.program, ro.agent.pool), s.engine, s.tokenizer, s.episodes, ro.agent.timeout_s, concurrency,
                         ro.agent.history, label)


def backend_name(cfg: Config, evaluation: bool = False) -> str:
    """The built-in backend the recipe's `rollout` section names."""
    ro = cfg.rollout
    if ro.workers.count and not evaluation:  # each worker runs the agent, if the recipe has one
        return "workers"
    return "agent" if ro.agent.program else "in_process"


def make_rollouts(setting: RolloutSetting) -> Rollouts:
    """The backend the recipe chooses, built from `setting`."""
    spec = setting.cfg.rollout.backend
    build = load_callable(spec, "rollout.backend") if spec else BACKENDS[backend_name(setting.cfg, setting.evaluation)]
    return build(setting)
