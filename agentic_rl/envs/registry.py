"""The env registry: a name -> EnvSpec dict. Third parties add theirs with `register_env` or through
the `agentic_rl.envs` entry-point group (a callable returning an EnvSpec). The built-in envs are
registered the first time a name is looked up."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from importlib.metadata import entry_points
from typing import Any

from agentic_rl.envs.spec import EnvSpec
from agentic_rl.errors import UnknownName

ENVS: dict[str, EnvSpec] = {}
FAMILIES: dict[str, Callable[[str], EnvSpec]] = {}  # "family" -> spec of "family:argument"


def register_env(spec: EnvSpec) -> EnvSpec:
    if spec.name in ENVS:
        raise ValueError(f"env {spec.name!r} is already registered")
    ENVS[spec.name] = spec
    return spec


def get_env(name: str) -> EnvSpec:
    """A registered env, or `FAMILY:ARGUMENT` made by a registered family (`swe_repair:DIR`: a
    user's directory of instances)."""
    _load_builtin()
    family, sep, argument = name.partition(":")
    if name not in ENVS and sep and family in FAMILIES:
        return FAMILIES[family](argument)
    if name not in ENVS:
        for ep in entry_points(group="agentic_rl.envs"):
            if ep.name == name:
                register_env(ep.load()())
    if name not in ENVS:
        raise UnknownName(f"unknown env {name!r}; known: {', '.join(sorted(ENVS))}")
    return ENVS[name]


def resolve_env(name: str, options: Mapping[str, Any]) -> EnvSpec:
    """The env a recipe's `env` section names: `get_env(name)`, bound to its options where its tasks
    come from them (`EnvSpec.bind`: the `tasks` env reads the files its options name)."""
    spec = get_env(name)
    return spec.bind(options) if spec.bind is not None else spec


_builtin_loaded = False


def _load_builtin() -> None:
    """The built-in envs' specs, registered once."""
    global _builtin_loaded
    if _builtin_loaded:
        return
    _builtin_loaded = True
    from agentic_rl.envs.adapters import gymnasium as gym_adapter
    from agentic_rl.envs.adapters import mcp, skyrl_gym
    from agentic_rl.envs.adapters import openenv as openenv_adapter
    from agentic_rl.envs.adapters import tau2 as tau2_adapter
    from agentic_rl.envs.adapters import verifiers as vf_adapter
    from agentic_rl.envs.builtin import (
        bfcl,
        calculator,
        code,
        frozen_lake,
        retool,
        search_r1,
        sokoban,
        sql,
        swe_repair,
        tasks,
    )

    for module in (bfcl, calculator, code, frozen_lake, retool, search_r1, sokoban, sql, swe_repair, tasks, mcp):
        for spec in module.SPECS:
            register_env(spec)
    FAMILIES["swe_repair"] = swe_repair.instances_spec
    FAMILIES["bfcl"] = bfcl.categories_spec
    FAMILIES["gym"] = gym_adapter.gym_spec
    FAMILIES["skyrl"] = skyrl_gym.skyrl_spec
    FAMILIES["vf"] = vf_adapter.vf_spec
    FAMILIES["openenv"] = openenv_adapter.openenv_spec
    FAMILIES["tau2"] = tau2_adapter.tau2_spec
