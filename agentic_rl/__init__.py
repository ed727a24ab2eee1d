"""agentic-rl: train LLM agents with RL over multi-turn, tool-using trajectories.

The public API, importable from the package itself:

    from agentic_rl import load_config, train
    results = train(load_config("recipes/tiny.yaml", ["rl.steps=3"]))

Each name is imported when first used, so `import agentic_rl.envs` (an env in a sandbox worker or a
Ray actor) does not pull in torch and the trainer.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # what editors and type checkers resolve; at run time each name loads on first use
    from agentic_rl.algorithms.advantages import ADVANTAGE_ESTIMATORS
    from agentic_rl.algorithms.aggregation import AGGREGATIONS
    from agentic_rl.algorithms.kl import KL_ESTIMATORS
    from agentic_rl.algorithms.losses import POLICY_LOSSES
    from agentic_rl.envs.base import StepResult, ToolEnv
    from agentic_rl.envs.registry import get_env, register_env
    from agentic_rl.envs.spec import EnvSpec
    from agentic_rl.rewards.base import Score
    from agentic_rl.trainer.checks import check_config
    from agentic_rl.trainer.config import Config, ConfigError, load_config, with_values
    from agentic_rl.trainer.evaluate import evaluate
    from agentic_rl.trainer.loop import train
    from agentic_rl.types import RolloutBatch, Task, Trajectory, TrajectoryGroup, Turn

# public name -> the module that defines it
_API = {
    # run a recipe
    "train": "agentic_rl.trainer.loop",
    "load_config": "agentic_rl.trainer.config",
    "with_values": "agentic_rl.trainer.config",
    "check_config": "agentic_rl.trainer.checks",
    "Config": "agentic_rl.trainer.config",
    "ConfigError": "agentic_rl.trainer.config",
    "evaluate": "agentic_rl.trainer.evaluate",
    # the data contract
    "Task": "agentic_rl.types",
    "Turn": "agentic_rl.types",
    "Trajectory": "agentic_rl.types",
    "TrajectoryGroup": "agentic_rl.types",
    "RolloutBatch": "agentic_rl.types",
    # extend: envs, tools, rewards, algorithms
    "EnvSpec": "agentic_rl.envs.spec",
    "register_env": "agentic_rl.envs.registry",
    "get_env": "agentic_rl.envs.registry",
    "ToolEnv": "agentic_rl.envs.base",
    "StepResult": "agentic_rl.envs.base",
    "Score": "agentic_rl.rewards.base",
    "ADVANTAGE_ESTIMATORS": "agentic_rl.algorithms.advantages",
    "POLICY_LOSSES": "agentic_rl.algorithms.losses",
    "AGGREGATIONS": "agentic_rl.algorithms.aggregation",
    "KL_ESTIMATORS": "agentic_rl.algorithms.kl",
}

__all__ = [  # the names of _API (tests/test_api.py checks they agree)
    "ADVANTAGE_ESTIMATORS", "AGGREGATIONS", "Config", "ConfigError", "EnvSpec", "KL_ESTIMATORS",
    "POLICY_LOSSES", "RolloutBatch", "Score", "StepResult", "Task", "ToolEnv", "Trajectory",
    "TrajectoryGroup", "Turn", "check_config", "evaluate", "get_env", "load_config", "register_env",
    "train", "with_values",
]


def __getattr__(name: str) -> Any:
    if name not in _API:
        raise AttributeError(f"module 'agentic_rl' has no attribute {name!r}")
    value = getattr(importlib.import_module(_API[name]), name)
    globals()[name] = value  # imported once
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
