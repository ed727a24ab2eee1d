"""Which writer a served engine uses (`rollout.engine.weight_update`, engines/weight_update.py), and the
recipe checks that keep a wrong choice from starting a run. The writers themselves run against
real servers: `load_weights` in test_served.py, the vLLM ones in test_vllm.py (slow)."""

from __future__ import annotations

import typing

import pytest

from agentic_rl.engines import weight_update
from agentic_rl.trainer.config import ConfigError, load_config
from agentic_rl.trainer.rollout_config import EngineConfig


def test_auto_reads_the_servers_health_answer():
    assert weight_update.writer("auto", {"version": 3, "dtype": "float32"}) is weight_update.load_weights  # ours
    assert weight_update.writer("auto", {}) is weight_update.vllm_reload  # vLLM's /health is an empty 200
    assert weight_update.writer("vllm_lora", {}) is weight_update.vllm_lora


def test_an_unknown_writer_is_refused():
    with pytest.raises(ValueError, match="one of auto, load_weights, vllm_reload, vllm_lora"):
        weight_update.writer("nccl", {})


@pytest.mark.parametrize("overrides, message", [
    (["rollout.engine.weight_update=nccl"], "rollout.engine.weight_update: 'nccl' is not one of auto, load_weights"),
    (["rollout.engine.weight_update=vllm_lora"], "model.lora_rank is 0"),
])
def test_the_recipe_is_checked(overrides, message):
    with pytest.raises(ConfigError, match=message):
        load_config("recipes/tiny.yaml", overrides)


def test_the_recipe_names_exactly_the_writers():
    """The closed choice `rollout.engine.weight_update` is the writers this module holds, plus auto."""
    choices = typing.get_args(typing.get_type_hints(EngineConfig)["weight_update"])
    assert set(choices) == {"auto", *weight_update.WRITERS}
