"""The RL stage: set up what the steps share, then step, watch, evaluate and checkpoint.

Each step is `rl_step.rl_step`. Around it: the collapse monitor and its remedies (a remedy that
changes a knob gives the loop a new config, logged as an event), the hacking monitor's warnings
(`monitor/hacking.py`), the count of steps skipped for a non-finite update, an optional held-out
evaluation every `eval.every` steps, and a state checkpoint every `checkpoint.every` steps from
which a killed run resumes exactly.
"""

from __future__ import annotations

import dataclasses
import time
from typing import TYPE_CHECKING

import torch
from tqdm import tqdm

from agentic_rl.data.curriculum import MIX_STRETCH, make_sampler, mixed_pool, mixed_tasks
from agentic_rl.engines.probe import SyncProbe
from agentic_rl.envs.base import close_env
from agentic_rl.envs.formats import bos_text
from agentic_rl.envs.spec import EnvSpec
from agentic_rl.models import sharding
from agentic_rl.models.device import device_of
from agentic_rl.models.loader import enable_gradient_checkpointing
from agentic_rl.models.lora import is_lora
from agentic_rl.models.memory import RLShape, available_bytes, check_memory, plan_memory
from agentic_rl.monitor.collapse import CollapseMonitor
from agentic_rl.monitor.hacking import HackingMonitor
from agentic_rl.monitor.logger import MetricsLogger
from agentic_rl.rollout.hindsight import reference_solutions
from agentic_rl.rollout.partial import SavedPool
from agentic_rl.trainer.config import Config, TaskConfig, with_values
from agentic_rl.trainer.credit import Scorer
from agentic_rl.trainer.critic import make_critic
from agentic_rl.trainer.distributed import DataParallel, world
from agentic_rl.trainer.episodes import episodes, hindsight_options
from agentic_rl.trainer.evaluate import accuracies, evaluate
from agentic_rl.trainer.loss_terms import build_loss
from agentic_rl.trainer.privileged import privileged_teacher
from agentic_rl.trainer.producer import Producer
from agentic_rl.trainer.remedies import Remedies
from agentic_rl.trainer.rl_step import RLRun, rl_step, sync_samplers
from agentic_rl.trainer.rollouts import RolloutSetting, make_rollouts
from agentic_rl.trainer.sft import adamw
from agentic_rl.trainer.state import Progress, SavedState, StateStore, capture_rng, restore_rng
from agentic_rl.trainer.stats import StepRecord
from agentic_rl.trainer.teachers import hindsight_teacher, load_teachers

if TYPE_CHECKING:
    from agentic_rl.trainer.loop import Run


class TrainingDiverged(RuntimeError):
    """`rl.max_bad_steps` consecutive steps had a non-finite loss or gradient."""


def run_rl(shared: Run, saved: SavedState | None = None) -> None:
    """RL steps from `progress.rl_step + 1` (0 on a fresh run) to `rl.steps`, with a state checkpoint
    every `checkpoint.every` steps and after the last; `shared`: what the stages of `train()` share."""
    model, tokenizer, engine, spec, cfg = shared.model, shared.tokenizer, shared.engine, shared.spec, shared.cfg
    logger, store, progress = shared.logger, shared.store, shared.progress
    # before the optimizer, the reference and the critic exist
    cfg, memory = fit_memory(cfg, model, prompt_tokens(spec, cfg.env.options, cfg.rl.seed, tokenizer))
    shared.cfg = cfg
    run, monitor, remedies = _setup(model, tokenizer, engine, spec, cfg, logger)
    try:
        in_flight, pool = {}, None
        if saved is not None and progress.rl_step > 0:
            in_flight, pool = _resume(run, monitor, remedies, saved, store)
        else:
            logger.log({"step": 0, "stage": "event", "event": "memory_estimate", **memory})
            if run.scorer.reference is not None:
                store.save_reference(run.scorer.reference)
        run.rollouts.sync(model, engine.version, run.probe)  # a backend's own samplers get the weights as they are
        run.producer = Producer(run, progress.rl_step + 1, cfg.rl.steps, cfg.rl.max_staleness, in_flight, pool)
        if pool is not None and (pool.groups or pool.pending):
            logger.log({"step": progress.rl_step, "stage": "event", "event": "partial_rollouts_resumed",
                        "groups": len(pool.groups), "restarted": len(run.producer.restarted)})
        _steps(run, cfg, monitor, remedies, store, progress)
    finally:
        if run.producer is not None:
            run.producer.close()
        run.rollouts.close()
    if run.scorer.critic is not None and run.parallel.world.main:
        run.scorer.critic.save(cfg.run_dir / "checkpoints" / "critic")


def _steps(run: RLRun, cfg: Config, monitor: CollapseMonitor, remedies: Remedies, store: StateStore,
           progress: Progress) -> None:
    """The steps, each watched, maybe evaluated, checkpointed. `cfg` is the recipe's (`run.cfg` is
    what remedies made of it)."""
    logger, steps = run.logger, cfg.rl.steps
    bar = tqdm(range(progress.rl_step + 1, steps + 1), desc="grpo", disable=not cfg.log.progress)
    for step in bar:
        record = rl_step(run, step)
        if (warning := run.hacking.update(record.rollout)) is not None:
            logger.log({"step": step, "stage": "event", **warning})
        run.reconfigure(_watch(monitor, remedies, record, run, logger))
        _count_bad_step(progress, record, run.cfg.rl.max_bad_steps, logger)
        if cfg.eval.every and step % cfg.eval.every == 0 and step < steps:  # the last: train() evaluates
            _eval_during_rl(step, run.engine, run.tokenizer, run.spec, cfg, logger)
        progress.rl_step = step
        if step % cfg.checkpoint.every == 0 or step == steps:
            progress.remedied = _changed(cfg, run.cfg)
            _save(run, monitor, remedies, store, progress, record, step)
        run.producer.synced(step)  # the batches the new weights may sample can start
        bar.set_postfix(reward=f"{record.rollout['reward_mean']:.2f}", acc=f"{record.rollout['accuracy']:.2f}")


def rl_pool(spec: EnvSpec, tasks: TaskConfig, steps: int, seed: int) -> list:
    """The RL prompts: `pool x steps x per_step` tasks of `tasks.splits` in equal shares, in
    `tasks.mix`'s shares when one is set (picked from a longer stretch of the stream, as sft.mix is)."""
    n = tasks.pool * steps * tasks.per_step
    if not tasks.mix:
        return mixed_pool(spec.tasks, tasks.splits, n, seed)
    return mixed_tasks(mixed_pool(spec.tasks, tasks.splits, MIX_STRETCH * n, seed), tasks.mix_key, tasks.mix, n)


def memory_shape(cfg: Config, model) -> RLShape:
    """What the memory estimate needs to know of the run (`models/memory.py`). The sampler's KV cache
    counts when this process samples (the embedded engine, no Ray workers, no agent program)."""
    rl, ro = cfg.rl, cfg.rollout
    here = ro.engine.name == "embedded" and not ro.workers.count and not ro.agent.program and not ro.backend
    return RLShape(rl.tasks.group_size, rl.optim.micro_batch_rows, ro.max_episode_tokens, ro.max_turns,
                   cfg.model.precision, reference=rl.algorithm.kl_coef > 0 and not is_lora(model),
                   critic_model=rl.critic.kind == "model", teachers=len(cfg.distill.teachers),
                   full_vocab=bool(cfg.distill.teachers or cfg.distill.privileged),
                   gradient_checkpointing=cfg.model.gradient_checkpointing, async_save=cfg.checkpoint.async_save,
                   shards=world().size if cfg.model.parallel == "fsdp" else 1,
                   micro_batch_tokens=rl.optim.micro_batch_tokens,
                   decoding=(ro.max_concurrent or rl.tasks.per_step * rl.tasks.group_size) if here else 0,
                   overlapped=rl.max_staleness > 0)


def fit_memory(cfg: Config, model, prompt: int, available: float | None = None) -> tuple[Config, dict]:
    """The recipe fitted to the machine's memory (`model.memory_plan`: `models/memory.py`'s
    plan_memory; gradient checkpointing turned on in `model` if the plan says so) and the checked
    estimate, with `mem_plan` naming what the plan changed."""
    available = available_bytes(device_of(model)) if available is None else available
    plan = cfg.model.memory_plan and cfg.model.memory_check  # without the check, nothing depends on free memory
    values = plan_memory(model, memory_shape(cfg, model), prompt, available)[1] if plan else {}
    if values.get("model.gradient_checkpointing"):
        enable_gradient_checkpointing(model)
    cfg = with_values(cfg, values)
    memory = check_memory(model, memory_shape(cfg, model), prompt, available, enforce=cfg.model.memory_check)
    return cfg, {**memory, **({"mem_plan": values} if values else {})}


def _setup(model, tokenizer, engine, spec: EnvSpec, cfg: Config, logger: MetricsLogger):
    """The run the steps share, the collapse monitor and the remedies."""
    rl = cfg.rl
    sampler = make_sampler(rl.tasks.sampler, rl_pool(spec, rl.tasks, rl.steps, rl.seed), seed=rl.seed)
    parallel = DataParallel(model, strategy=cfg.model.parallel)  # before the optimizer: FSDP swaps the parameters
    critic = make_critic(rl.critic.kind, model, tokenizer, rl.critic.model)
    optimizer = _optimizer(model, critic, rl.optim.lr, rl.critic.lr)
    reference = _reference(model) if rl.algorithm.kl_coef > 0 and not is_lora(model) else None
    monitor, remedies = CollapseMonitor(window=rl.collapse.window), Remedies(optimizer, model)
    teachers = load_teachers(cfg.distill, tokenizer, device_of(model)) or privileged_teacher(cfg, model, tokenizer, spec)
    h = cfg.hindsight
    hindsight = None if h.coef <= 0 else hindsight_options(
        h, reference_solutions(spec, cfg.env.options) if h.reveal_solution else None)
    eps = episodes(spec, cfg.env.options, cfg.rollout, reward=cfg.reward, policy=cfg.model.name)
    run = RLRun(
        cfg=cfg, model=model, tokenizer=tokenizer, engine=engine, spec=spec, episodes=eps, sampler=sampler,
        optimizer=optimizer, loss=build_loss(cfg, model, reference, critic, teachers),
        scorer=Scorer(model, tokenizer.pad_token_id, cfg.model.precision, cfg.rollout.temperature, reference, critic),
        logger=logger, teachers=teachers, hindsight=hindsight, hacking=HackingMonitor(window=rl.collapse.window),
        hindsight_engine=hindsight_teacher(h, tokenizer, cfg.model.precision, device_of(model)),
        probe=sync_probe(engine, tokenizer, cfg), parallel=parallel,
        # where the steps' episodes are sampled (`trainer/rollouts.py`)
        rollouts=make_rollouts(RolloutSetting(cfg=cfg, engine=engine, tokenizer=tokenizer, episodes=eps)))
    return run, monitor, remedies


def sync_probe(engine, tokenizer, cfg: Config) -> SyncProbe | None:
    """The check of every weight sync (`engines/probe.py`), unless the recipe turns it off."""
    tol = cfg.rollout.engine.sync_probe_tol
    return None if tol < 0 else SyncProbe.build(engine, tokenizer, cfg.model.precision, tol)


def _optimizer(model, critic, lr: float, critic_lr: float):
    """AdamW over the trainable policy parameters, plus the critic (head, and its own backbone if it
    has one) at its own learning rate. Each group keeps its `base_lr` (the schedule scales it; the
    lower_lr remedy halves it) inside the optimizer, so its state_dict is the whole schedule state."""
    groups = [{"params": [p for p in model.parameters() if p.requires_grad], "lr": lr, "base_lr": lr}]
    if critic is not None:
        groups.append({"params": [p for p in critic.parameters() if p.requires_grad], "lr": critic_lr,
                       "base_lr": critic_lr})
    return adamw(groups, lr)


def _reference(model):
    """Frozen copy of the policy as it enters RL (the SFT model): the KL anchor."""
    ref = sharding.full_copy(model)  # whole on every rank when the policy is sharded
    ref.eval()
    for p in ref.parameters():
        p.requires_grad_(False)
    return ref


def prompt_tokens(spec: EnvSpec, options: dict, seed: int, tokenizer, tries: int = 3) -> int:
    """The tokens of a training task's prompt (system prompt, tools, question), for the memory
    estimate. A reset that fails is the machine's, as in a rollout: tried on a fresh env `tries` times
    before it stops the run."""
    task = spec.tasks("train", 1, seed)[0]
    for attempt in range(tries):
        env = spec.make_env(options)
        try:
            text = bos_text(env.format, tokenizer) + env.format.render_prompt(env.reset(task), env.tool_schemas)
            return len(tokenizer.encode(text, add_special_tokens=False))
        except Exception:  # noqa: BLE001 - the rollout's rule: a reset that raises is tried again
            if attempt == tries - 1:
                raise
        finally:
            close_env(env)
    raise AssertionError("unreachable")


def _watch(monitor: CollapseMonitor, remedies: Remedies, record: StepRecord, run: RLRun,
           logger: MetricsLogger) -> Config:
    """The echo-trap monitor after each step: a warning and its remedies become events (and the
    config they leave); a quiet step is the new healthy point a rollback returns to. Weights a
    remedy restored go to the sampler at once (the Ray workers too), so the next rollout samples the
    policy that trains."""
    actions = run.cfg.rl.collapse.actions
    warning = monitor.update(record.indicators())
    if warning is None:
        if "rollback" in actions:
            remedies.mark_healthy()
        return run.cfg
    cfg, events, weights_changed = remedies.apply(actions, run.cfg)
    if weights_changed:
        sync_samplers(run)
        run.producer.discard(record.step)  # batches sampled by the weights rolled back from: produced again
    for event in [warning, *events]:
        logger.log({"step": record.step, "stage": "event", **event})
    return cfg


def _count_bad_step(progress: Progress, record: StepRecord, max_bad_steps: int, logger: MetricsLogger) -> None:
    """A step whose update was skipped for a non-finite loss or gradient is an event; too many in a
    row stop the run with the evidence (the weights are still the last finite ones)."""
    health = record.health
    if not health.nonfinite_minibatches:
        progress.bad_steps = 0
        return
    progress.bad_steps += 1
    logger.log({"step": record.step, "stage": "event", "event": "nonfinite_update_skipped",
                "consecutive": progress.bad_steps, "loss": health.loss, "grad_norm": health.grad_norm})
    if progress.bad_steps >= max_bad_steps:
        raise TrainingDiverged(f"{progress.bad_steps} consecutive RL steps had a non-finite loss or gradient "
                               f"(last at step {record.step}: loss={health.loss}, "
                               f"grad_norm={health.grad_norm}); the run stops (rl.max_bad_steps). "
                               "Try a lower rl.optim.lr or model.precision: fp32.")


def _eval_during_rl(step: int, engine, tokenizer, spec: EnvSpec, cfg: Config, logger: MetricsLogger) -> None:
    """Held-out accuracy after `step` (greedy, as the final evaluation). The RNG streams are put back
    afterwards, so a run with a learning curve trains exactly as one without."""
    rng = capture_rng()
    t0 = time.perf_counter()
    result = evaluate(engine, tokenizer, spec, cfg, label=f"rl step {step}")
    restore_rng(rng)
    logger.log({"step": step, "stage": "eval", "model": f"rl-step{step}", **accuracies(result),
                "time_eval_s": round(time.perf_counter() - t0, 1)})


def _changed(before: Config, now: Config) -> dict:
    """The RL knobs a remedy changed, by dotted key, with their live values."""
    out = {}

    def walk(a, b, prefix: str) -> None:
        for f in dataclasses.fields(a):
            x, y = getattr(a, f.name), getattr(b, f.name)
            if dataclasses.is_dataclass(x):
                walk(x, y, f"{prefix}{f.name}.")
            elif x != y:
                out[f"{prefix}{f.name}"] = y

    walk(before.rl, now.rl, "rl.")
    return out


def _save(run: RLRun, monitor: CollapseMonitor, remedies: Remedies, store: StateStore, progress: Progress,
          record: StepRecord, step: int) -> None:
    cfg = run.cfg
    progress.logger_step, progress.engine_version = run.logger.global_step, run.engine.version
    progress.metric = record.row().get(cfg.checkpoint.best_metric) if cfg.checkpoint.best_metric else None
    store.save(f"rl-step{step}", progress, run.model, run.optimizer, run.scorer.critic, config=cfg, extras={
        "sampler": run.sampler.state_dict(), "monitor": dataclasses.asdict(monitor), "healthy": remedies.healthy,
        "hacking_monitor": dataclasses.asdict(run.hacking),
        "in_flight": run.producer.in_flight(),
        **({"partial_pool": run.producer.saved_pool()} if run.producer.partial is not None else {})})


def _resume(run: RLRun, monitor: CollapseMonitor, remedies: Remedies, saved: SavedState,
            store: StateStore) -> tuple[dict, SavedPool | None]:
    """Everything the loop carries, as it was at the saved step; returns the batches produced for the
    steps after it (`producer.py`: restored, not sampled again) and, with partial rollouts, the
    groups that were in flight (their envs rebuilt by the producer: `rollout/partial.py`; a state
    written before groups were kept holds only their tasks, `partial_in_flight`, which start over)."""
    extras = saved.load("extras")
    sharding.load_optimizer_state(run.model, run.optimizer, saved.load("optimizer"))
    if run.scorer.critic is not None:
        run.scorer.critic.load_state_dict(saved.load("critic"))
    if run.scorer.reference is not None:
        run.scorer.reference.load_state_dict(torch.load(store.reference_path, weights_only=True))
    run.sampler.load_state_dict(extras["sampler"])
    for k, v in extras["monitor"].items():
        setattr(monitor, k, v)
    for k, v in extras.get("hacking_monitor", {}).items():
        setattr(run.hacking, k, v)
    remedies.healthy = extras["healthy"]
    run.reconfigure(with_values(run.cfg, saved.progress.remedied))
    pool = extras.get("partial_pool")
    if pool is None and extras.get("partial_in_flight"):
        pool = SavedPool(tuple(extras["partial_in_flight"]))
    return extras.get("in_flight", {}), pool
