"""The recipe's `rollout` section: sampling and budgets flat, and the concerns that have settings of
their own in subsections — the sampler (`rollout.engine`), Ray workers (`rollout.workers`), an agent
program (`rollout.agent`) and the context budget (`rollout.context`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal


@dataclass(frozen=True)
class EngineConfig:
    """rollout.engine.name: the policy's sampler (docs/engines)."""

    # "embedded" (in this process), "managed" (an `agentic-rl serve` this run starts and stops),
    # "managed_vllm" (a vLLM server it starts and stops), or the URL of a served one (http://host:port:
    # ours or vLLM)
    name: str = "embedded"
    timeout_s: float = 120.0  # a served engine's request timeout
    # how a served engine gets the trainer's weights (engines/weight_update.py): auto reads the server's
    # /health; load_weights (agentic-rl serve) | vllm_reload (vLLM, full weights) | vllm_lora (vLLM, runtime
    # LoRA adapters)
    weight_update: Literal["auto", "load_weights", "vllm_reload", "vllm_lora"] = "auto"
    vllm_python: str = ""  # managed_vllm: the Python that has vLLM ("" = this one; `make vllm` builds .venv-vllm)
    vllm_args: str = ""  # managed_vllm: more arguments for vLLM's server (e.g. "--gpu-memory-utilization 0.5")
    # after every weight sync the sampler's logprobs of a fixed sequence are checked against the
    # trainer's (engines/probe.py): the mean gap a token allowed; 0 = by the sampler's dtype
    # (1e-3 fp32, 0.1 bf16: the run's config.yaml holds the tolerance resolved); < 0 = no check
    sync_probe_tol: float = 0.0


@dataclass(frozen=True)
class WorkersConfig:
    """rollout.workers.count: RL rollouts on Ray actors (docs/distributed.md#rollout-workers-on-ray), each an
    embedded engine with its own envs."""

    count: int = 0  # 0 = in this process
    cpus: float = 1.0  # Ray CPUs reserved per rollout worker
    gpus: float = 0.0  # Ray GPUs per rollout worker (Ray then shows each worker its own devices)


@dataclass(frozen=True)
class AgentConfig:
    """rollout.agent.program: RL rollouts by an agent program of your own through the recording proxy (docs/proxy.md)."""

    program: str = ""  # "module:function" or "file.py:function", called as function(task, base_url) -> reward | None
    # replies the agent sends back: keep (fed as sampled: one trajectory) | template (fed as the chat template
    # renders them where it rewrites history, e.g. drops earlier reasoning: the episode starts a new context there)
    history: Literal["keep", "template"] = "keep"
    # an agent's episode still running this long after it started is given up: an infrastructure failure
    # (kind agent), its calls refused from then on; 0 = no limit
    timeout_s: float = 600.0
    # episodes run at once (an `async def` agent's as tasks on one event loop, a function's on a pool of
    # threads), their calls batched by the engine; 0 = all of a step's (tasks x group)
    concurrency: int = 0
    # where a sync agent function runs: thread (a reused pool of the trainer's threads) | process (a reused
    # pool of worker processes, spawned; a hung worker is killed at timeout_s, a dead one costs its episode);
    # an `async def` agent runs on one event loop either way
    pool: Literal["thread", "process"] = "thread"


@dataclass(frozen=True)
class ContextConfig:
    """rollout.context: each context of an episode kept within a token budget (rollout/context.py)."""

    # none | drop_observations | truncate_observations | compact (the policy summarizes its progress)
    strategy: str = "none"
    budget_tokens: int = 0  # the most tokens a context holds, the next action's room included
    keep_last: int = 1  # observations kept whole (drop_observations, truncate_observations)
    observation_chars: int = 200  # truncate_observations: what an older observation keeps


@dataclass(frozen=True)
class RolloutConfig:
    # sampling
    temperature: float = 1.0
    top_p: float = 1.0
    # "batch": one random generator per rollout batch; "episode": one per episode, seeded by the step and
    # the episode's place in it, so an episode samples the same tokens however the step is split
    # (data-parallel ranks, Ray workers)
    rng: Literal["batch", "episode"] = "batch"
    # budgets
    max_turns: int = 4
    max_new_tokens: int = 96  # per turn
    max_episode_tokens: int = 256  # generated tokens per episode
    step_timeout_s: float = 60.0  # an env step (or reward) running longer ends its episode with an error; 0 = no limit
    max_concurrent: int = 0  # episodes decoded at once (each holds a KV cache); 0 = a whole step's tasks x group
    # where episodes are sampled (docs/rollouts.md): "" = the backend the sections below choose (an agent
    # program, Ray workers, this process's engine), or a class of your own, "module:Class" or
    # "file.py:Class", built as Class(setting) from a trainer.rollouts.RolloutSetting
    backend: str = ""
    engine: EngineConfig = field(default_factory=EngineConfig)
    workers: WorkersConfig = field(default_factory=WorkersConfig)
    agent: AgentConfig = field(default_factory=AgentConfig)
    context: ContextConfig = field(default_factory=ContextConfig)
