"""`train(cfg)`: the whole run, top to bottom — baselines, SFT, RL, held-out evaluation.

Each stage ends in a state checkpoint (and RL every `checkpoint.every` steps), so `train(cfg,
resume="auto")` after a kill skips what is done and continues from the last state exactly.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import yaml

from agentic_rl.engines.hf import HFEngine
from agentic_rl.engines.managed import close_engine, served_engine
from agentic_rl.engines.probe import checked_sync
from agentic_rl.envs.base import close_env
from agentic_rl.envs.registry import resolve_env
from agentic_rl.envs.spec import EnvSpec
from agentic_rl.errors import UserError
from agentic_rl.models import precision, sharding
from agentic_rl.models.checkpoint import save_checkpoint
from agentic_rl.models.device import resolve_device
from agentic_rl.models.loader import enable_gradient_checkpointing, load_model
from agentic_rl.models.lora import apply_lora, is_lora, start_rl_adapter
from agentic_rl.models.threads import ThreadChoice, auto_threads
from agentic_rl.monitor.logger import MetricsLogger, SilentLogger, write_readable
from agentic_rl.monitor.report import write_report
from agentic_rl.trainer.checks import check_config
from agentic_rl.trainer.config import Config, ModelConfig, to_dict, with_values
from agentic_rl.trainer.cpt import run_cpt
from agentic_rl.trainer.distributed import World, init_world
from agentic_rl.trainer.distributed import world as current_world
from agentic_rl.trainer.evaluate import accuracies, evaluate
from agentic_rl.trainer.graduation import graduation_report
from agentic_rl.trainer.rl_loop import run_rl, sync_probe
from agentic_rl.trainer.sft import run_sft
from agentic_rl.trainer.state import Progress, SavedState, StateStore, restore_rng


class NotGraduated(UserError, ValueError):
    """`sft.require_graduation` and the graduation report said not ready."""


def train(cfg: Config, resume: str | None = None) -> dict:
    """`resume`: "auto" (the latest state of this run, if any) or a state directory."""
    check_config(cfg)
    world = init_world(cfg.model.device)  # data-parallel under torchrun (`distributed.py`)
    cfg, machine = resolve_machine(cfg, world)
    model, tokenizer, spec = prepare(cfg)  # first: a model that fails to load leaves the folder as it was
    sharded = world.size > 1 and cfg.model.parallel == "fsdp"
    store, saved = _open_states(cfg, resume, world, sharded)
    progress = saved.progress if saved else Progress(world_size=world.size, sharded=sharded)
    if progress.machine:  # a resumed run goes on with the threads and dtype it started with
        cfg, machine = _with_machine(cfg, progress.machine), f"{machine}; resumed with {progress.machine}"
    progress.machine = {"threads": cfg.model.threads, "precision": cfg.model.precision}
    if world.main:
        print(f"agentic-rl: {cfg.name}: {machine}; run folder {cfg.run_dir}", flush=True)
    if progress.rl_adapter:
        model = _rl_shape(model, cfg.model)
    if saved is not None:
        _restore(model, saved)
    logger = (MetricsLogger(cfg.run_dir, cfg.log.tensorboard, cfg.log.mlflow, cfg.log.wandb, cfg.name, to_dict(cfg))
              if world.main else SilentLogger())
    logger.global_step = progress.logger_step
    if saved is None:  # the threads and dtype the run resolved (a resumed run keeps them)
        logger.log({"step": 0, "stage": "event", "event": "machine", **progress.machine})
    engine = _engine(model, tokenizer, cfg, progress.engine_version)
    run = None
    try:  # from the moment a managed server runs, the run stops it however it ends
        cfg = _with_probe_tolerance(cfg, engine, tokenizer)
        if world.main:
            (cfg.run_dir / "config.yaml").write_text(yaml.safe_dump(to_dict(cfg), sort_keys=False))
        if sharded:
            sharding.shard(model)  # after the sampler took its own copy; before any optimizer is built
        run = Run(cfg=cfg, model=model, tokenizer=tokenizer, spec=spec, engine=engine, logger=logger, store=store,
                  progress=progress, world=world)
        return _stages(run, saved)
    finally:
        close_engine(run.engine if run is not None else engine)


def _stages(run: Run, saved) -> dict:
    """Baselines, continual pre-training, SFT, RL and the held-out evaluations, each skipped when a
    resumed run has it."""
    cfg, tokenizer, logger, store, progress = run.cfg, run.tokenizer, run.logger, run.store, run.progress

    if cfg.eval.baselines and "baselines" not in progress.stages:
        run.held_out("base_zero_shot")
        if not cfg.rollout.agent.program:  # an agent program brings its own prompt: a few-shot one is the same run
            run.held_out("base_few_shot", fewshot=True)
        run.done("baselines", weights=False)
    if cfg.cpt.corpus and "cpt" not in progress.stages:
        run.timed("cpt", lambda: run_cpt(run, saved))
        checked_sync(run.engine, run.model, sync_probe(run.engine, tokenizer, cfg))
        run.save_weights("cpt")
        run.done("cpt", weights=True)
    if (cfg.sft.examples or cfg.sft.data) and "sft" not in progress.stages:
        losses = run.timed("sft", lambda: run_sft(run, saved))
        checked_sync(run.engine, run.model, sync_probe(run.engine, tokenizer, cfg))
        run.save_weights("sft")
        episodes: dict = {}
        run.held_out("sft", episodes=episodes)
        if cfg.sft.graduation or cfg.sft.require_graduation:  # its format check reads the eval's episodes
            _graduate(run, losses, episodes.get(cfg.eval.splits[0], ()) if cfg.eval.splits else ())
        run.done("sft", weights=True)
    if cfg.rl.steps and "rl" not in progress.stages:
        if not progress.rl_adapter and is_lora(run.model):  # the KL reference (adapters off) becomes the SFT model
            run.model, progress.rl_adapter = _rl_shape(run.model, cfg.model), True
            run.engine = _engine(run.model, tokenizer, cfg, run.engine.version, run.engine)
        run.timed("rl", lambda: run_rl(run, saved))
        progress.stages.append("rl")
    if cfg.rl.steps:
        run.save_weights("rl")
        run.held_out("rl", step=cfg.rl.steps)
    logger.close()
    if run.world.main:
        write_readable(cfg.run_dir / "eval.json", progress.results)
        write_report(cfg.run_dir, tokenizer)
    store.wait()  # the last state, written while the model was evaluated
    return progress.results


def _open_states(cfg: Config, resume: str | None, world: World, sharded: bool) -> tuple[StateStore, SavedState | None]:
    """The run's state store and the state to resume from; rank 0 prepares the folder (clears or cuts
    its logs) before the other ranks read it. A state resumes at the world size and sharding that
    wrote it."""
    store = StateStore(cfg.run_dir, cfg.checkpoint, writes=world.main)
    saved = store.open(resume) if world.main else None
    world.barrier()
    if not world.main:
        saved = store.open(resume)
    if saved is not None and saved.progress.world_size != world.size:
        raise ValueError(f"the state {saved.path} was written by {saved.progress.world_size} data-parallel "
                         f"process(es); resume it with torchrun --nproc-per-node {saved.progress.world_size} "
                         f"(this run has {world.size})")
    if saved is not None and saved.progress.sharded != sharded:
        raise ValueError(f"the state {saved.path} was written with model.parallel: "
                         f"{'fsdp' if saved.progress.sharded else 'ddp'}; resume it with --set model.parallel="
                         f"{'fsdp' if saved.progress.sharded else 'ddp'}")
    return store, saved


def resolve_machine(cfg: Config, world: World) -> tuple[Config, str]:
    """The recipe with `model.threads: 0` and `model.precision: auto` resolved for this machine
    (`models/threads.py`, `models/precision.py`; every rank takes rank 0's dtype), and the startup
    line's account of them. The run's config.yaml holds the resolved values."""
    m = cfg.model
    threads = ThreadChoice(m.threads, "model.threads") if m.threads else auto_threads()
    torch.set_num_threads(threads.count)
    device = resolve_device(m.device)
    dtype, why = precision.resolve(m.precision, device), precision.describe(m.precision, device)
    if world.size > 1:
        dtype = world.gather(dtype)[0]
    cfg = _with_machine(cfg, {"threads": threads.count, "precision": dtype})
    return cfg, f"{device}, {why}, {threads.count} torch thread{'s' * (threads.count > 1)} ({threads.why})"


def _with_probe_tolerance(cfg: Config, engine, tokenizer) -> Config:
    """`rollout.engine.sync_probe_tol: 0` resolved to the tolerance the sampler's dtype calls for
    (`engines/probe.py`), so the run's config.yaml says the tolerance its probe checks."""
    probe = sync_probe(engine, tokenizer, cfg) if cfg.rollout.engine.sync_probe_tol == 0 else None
    return with_values(cfg, {"rollout.engine.sync_probe_tol": probe.tolerance}) if probe is not None else cfg


def _with_machine(cfg: Config, machine: dict) -> Config:
    torch.set_num_threads(machine["threads"])
    return with_values(cfg, {"model.threads": machine["threads"], "model.precision": machine["precision"]})


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def prepare(cfg: Config):
    """Seeds, threads, the policy (with LoRA if asked) and the env spec."""
    seed_everything(cfg.seed)
    if cfg.model.threads:
        torch.set_num_threads(cfg.model.threads)
    model, tokenizer = load_model(cfg.model.name, seed=cfg.seed, device=cfg.model.device,
                                  rope_scaling=cfg.model.rope_scaling)
    if cfg.model.gradient_checkpointing:
        enable_gradient_checkpointing(model)
    if cfg.model.lora_rank:
        model = apply_lora(model, cfg.model.lora_rank, cfg.model.lora_alpha)
    spec = resolve_env(cfg.env.name, cfg.env.options)
    speak_the_format(tokenizer, spec, cfg.env.options)
    return model, tokenizer, spec


def speak_the_format(tokenizer, spec, options) -> None:
    """A format rendered by a chat template (a model family's: llama3_json, mistral, qwen3, ...) becomes
    the tokenizer's template, so every checkpoint saves the template it was trained in and a server
    (ours, or vLLM with that family's tool parser) prompts it as trained."""
    env = spec.make_env(options)
    try:
        template = getattr(env.format, "template", None)
    finally:
        close_env(env)
    if template:
        tokenizer.chat_template = template


@dataclass(kw_only=True)
class Run:
    """What the stages of `train()` share, and the bookkeeping each stage ends with. Not frozen: the
    RL stage swaps in the LoRA policy's RL shape (`model`) and its sampler (`engine`)."""

    cfg: Config
    model: torch.nn.Module
    tokenizer: Any
    spec: EnvSpec
    engine: HFEngine
    logger: MetricsLogger
    store: StateStore
    progress: Progress
    world: World = World()

    def timed(self, name: str, fn: Callable):
        t0 = time.perf_counter()
        out = fn()
        self.progress.results["timing_s"][name] = round(time.perf_counter() - t0, 1)
        return out

    def held_out(self, name: str, fewshot: bool = False, step: int = 0, episodes: dict | None = None) -> None:
        """Held-out evaluation of the current weights, kept as `results[name]`. `step` is the RL step the
        weights have seen, so the final point sits at the end of the `eval.every` curve (the
        baselines and the SFT model are step 0)."""
        results = self.progress.results
        results[name] = self.timed(f"eval_{name}", lambda: evaluate(
            self.engine, self.tokenizer, self.spec, self.cfg, fewshot, name, episodes=episodes))
        self.logger.log({"step": step, "stage": "eval", "model": name, **accuracies(results[name])})

    def save_weights(self, stage: str) -> None:
        """The stage's weights as a model checkpoint (checkpoints/<stage>), by rank 0."""
        state = sharding.full_state_dict(self.model) if sharding.root(self.model) is not None else None
        if self.world.main:
            save_checkpoint(self.model, self.tokenizer, self.cfg.run_dir / "checkpoints" / stage, state)

    def done(self, stage: str, weights: bool) -> None:
        """The stage is over: a state checkpoint (with the weights, when the stage changed them)."""
        self.progress.stages.append(stage)
        self.progress.logger_step, self.progress.engine_version = self.logger.global_step, self.engine.version
        self.store.save(stage, self.progress, self.model if weights else None, config=self.cfg)


def _engine(model, tokenizer, cfg: Config, version: int, current=None):
    """The policy's sampler `rollout.engine` names, serving `model` (`current`: the one it replaces,
    which a served engine keeps, pointed at the new model)."""
    if cfg.rollout.engine.name != "embedded":
        if current is not None:
            current.model = model
            return current
        return served_engine(model, tokenizer, cfg, version, current_world())
    # its own copy when rollouts run while the policy trains, or when the policy will be sharded
    own = cfg.rl.max_staleness > 0 or cfg.model.parallel == "fsdp"
    engine = HFEngine(model, tokenizer, cfg.model.precision, own_copy=own)
    engine.version = version
    return engine


def _rl_shape(model, m: ModelConfig):
    """LoRA: the SFT adapter merged into the base, which becomes the KL reference, and a fresh adapter on."""
    return start_rl_adapter(model, m.lora_rank, m.lora_alpha)


def _restore(model, saved) -> None:
    """The saved weights (when the state has any) and the RNG streams as they were at the save."""
    weights = saved.load("model")
    if weights is not None:
        model.load_state_dict(weights)
    restore_rng(saved.load("extras")["rng"])


def _graduate(run: Run, losses, evaluated=()) -> None:
    cfg, results = run.cfg, run.progress.results
    report = run.timed("graduation", lambda: graduation_report(run.engine, run.tokenizer, run.spec, cfg, losses,
                                                               evaluated))
    results["graduation"] = report.to_dict()
    if run.world.main:
        (cfg.run_dir / "graduation.json").write_text(json.dumps(report.to_dict(), indent=2))
    print(report.summary())
    if cfg.sft.require_graduation and not report.graduated:
        run.logger.close()
        if run.world.main:
            write_readable(cfg.run_dir / "eval.json", results)
        raise NotGraduated(f"SFT did not graduate, so RL does not start ({cfg.run_dir / 'graduation.json'}): "
                           f"{report.summary()}")
