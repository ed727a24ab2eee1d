"""The stages `train()` calls: SFT on demonstrations and the GRPO loop, each logging its steps."""

from __future__ import annotations

import dataclasses
import math
import time
import warnings
from dataclasses import dataclass

import torch
from tqdm import tqdm

from agentic_rl.algorithms.dapo import dynamic_sampling_keep
from agentic_rl.data.curriculum import make_sampler, mixed_pool, mixed_tasks
from agentic_rl.data.sft_data import load_sft_file
from agentic_rl.engines.base import SamplingParams
from agentic_rl.envs.registry import EnvSpec
from agentic_rl.models.lora import is_lora
from agentic_rl.monitor.collapse import CollapseMonitor, Remedies, keep_top_spread
from agentic_rl.monitor.logger import MetricsLogger
from agentic_rl.monitor.metrics import rollout_metrics
from agentic_rl.monitor.trajectories import write_trajectories
from agentic_rl.rewards.process import apply_process_rewards, process_reward
from agentic_rl.rewards.scoring import score_groups
from agentic_rl.rollout.demos import demonstrate
from agentic_rl.rollout.hindsight import (
    DEMONSTRATION_TEACHER,
    HindsightOptions,
    HindsightResult,
    demonstration_corrections,
    failed_episodes,
    hindsight_corrections,
    reference_solutions,
)
from agentic_rl.rollout.loop import Budget, RolloutStats, rollout
from agentic_rl.trainer.config import Config, RLConfig
from agentic_rl.trainer.credit import (
    compute_credit,
    critic_values,
    kl_token_rewards,
    observations_as_actions,
    outcome_rewards,
)
from agentic_rl.trainer.critic import make_critic
from agentic_rl.trainer.evaluate import accuracies, evaluate
from agentic_rl.trainer.freeze import freeze_lower_layers
from agentic_rl.trainer.memory import check_memory, peak_rss_gb
from agentic_rl.trainer.rl import CriticTargets, rl_update
from agentic_rl.trainer.sft import adamw, sft_loss, sft_optimizer, sft_train
from agentic_rl.trainer.state import Progress, SavedState, StateStore, capture_rng, restore_rng
from agentic_rl.trainer.teachers import Teachers, hindsight_teacher, load_teachers

# sft.mix and rl.mix pick from a stream this many times longer than they need: enough of any share a
# recipe sets
MIX_STRETCH = 40


def sft_trajectories(spec: EnvSpec, cfg: Config, tokenizer) -> list:
    """The SFT data: a file (`sft.data`) or the env's demonstrations, capped at `sft.examples`."""
    s = cfg.sft
    if s.data:
        env = spec.make_env(cfg.env.options)
        data = load_sft_file(s.data, env.format, tokenizer, env.tool_schemas, s.min_reward)
        return data[: s.examples] if s.examples else data
    if spec.demonstration is None:
        raise ValueError(f"env {spec.name!r} has no demonstrations: give sft.data or set sft.examples: 0")
    tasks = (mixed_tasks(spec.tasks("train", MIX_STRETCH * s.examples, s.seed), s.mix_key, s.mix, s.examples) if s.mix
             else spec.tasks("train", s.examples, s.seed))
    return [demonstrate(spec, cfg.env.options, t, tokenizer)[1] for t in tasks]


def run_sft(model, tokenizer, spec: EnvSpec, cfg: Config, logger: MetricsLogger, store: StateStore | None = None,
            progress: Progress | None = None, saved: SavedState | None = None) -> list[float]:
    """Trains, logs every step (and the held-out loss), returns the training losses. With a state
    store, a state every `checkpoint.sft_every` steps; a resumed run continues after `progress.sft_step`."""
    s = cfg.sft
    progress = progress or Progress()
    data = sft_trajectories(spec, cfg, tokenizer)
    cut = int(len(data) * s.heldout)
    held, train_data = data[:cut], data[cut:]
    total = s.epochs * -(-len(train_data) // (s.batch_size * s.grad_accum))
    bar = tqdm(total=total, initial=progress.sft_step, desc="sft", disable=not cfg.log.progress)
    optimizer = sft_optimizer(model, s.lr)
    if saved is not None and progress.sft_step:
        optimizer.load_state_dict(saved.load("optimizer"))
    losses: list[float] = progress.sft_losses

    def on_step(step: int, metrics: dict) -> None:
        bar.update(1)
        bar.set_postfix(loss=f"{metrics['loss']:.3f}")
        losses.append(metrics["loss"])
        logger.log({"step": step, "stage": "sft", **metrics, "time_train_s": metrics["time_step_s"]})
        every = cfg.checkpoint.sft_every
        if store is not None and every and step % every == 0 and step < total:
            progress.sft_step, progress.logger_step = step, logger.global_step
            store.save(f"sft-step{step}", progress, model, optimizer, config=cfg)

    sft_train(model, train_data, s.lr, s.batch_size, s.epochs, tokenizer.pad_token_id, cfg.model.precision, s.seed,
              on_step, s.grad_accum, s.pack, optimizer, progress.sft_step)
    bar.close()
    if held:
        logger.log({"step": len(losses), "stage": "sft_eval", "heldout_loss": sft_loss(
            model, held, tokenizer.pad_token_id, cfg.model.precision), "heldout_examples": len(held)})
    return losses


@dataclass
class RLParts:
    """What the RL loop carries from step to step, and so what a state checkpoint must hold."""

    sampler: object
    critic: object
    optimizer: torch.optim.Optimizer
    ref_model: object
    monitor: CollapseMonitor
    remedies: Remedies
    teachers: Teachers | None = None  # on-policy distillation
    hindsight_teacher: object = None  # an engine for hindsight.teacher; None = the policy's own engine


def rl_pool(spec: EnvSpec, rl: RLConfig) -> list:
    """The RL prompts: `task_pool x steps x tasks_per_step` tasks of `rl.splits` in equal shares, in
    `rl.mix`'s shares when one is set (picked from a longer stretch of the stream, as sft.mix is)."""
    n = rl.task_pool * rl.steps * rl.tasks_per_step
    if not rl.mix:
        return mixed_pool(spec.tasks, rl.splits, n, rl.seed)
    return mixed_tasks(mixed_pool(spec.tasks, rl.splits, MIX_STRETCH * n, rl.seed), rl.mix_key, rl.mix, n)


def rl_parts(model, tokenizer, spec: EnvSpec, cfg: Config) -> RLParts:
    rl = cfg.rl
    sampler = make_sampler(rl.task_sampler, rl_pool(spec, rl), seed=rl.seed)
    critic = make_critic(rl.critic, model, tokenizer, rl.critic_model)
    freeze_lower_layers(model, rl.freeze_layers)  # before the optimizer, which takes what still trains
    optimizer = _optimizer(model, critic, rl)
    ref_model = _reference(model) if rl.kl_coef > 0 and not is_lora(model) else None
    return RLParts(sampler, critic, optimizer, ref_model, CollapseMonitor(window=rl.collapse_window),
                   Remedies(rl, optimizer, model), load_teachers(cfg, tokenizer), hindsight_teacher(cfg, tokenizer))


def run_rl(model, tokenizer, engine, spec: EnvSpec, cfg: Config, logger: MetricsLogger,
           store: StateStore | None = None, progress: Progress | None = None, saved: SavedState | None = None) -> None:
    """RL steps from `progress.rl_step + 1` (0 on a fresh run) to `rl.steps`, with a state checkpoint
    every `checkpoint.every` steps and after the last."""
    rl, ro = cfg.rl, cfg.rollout
    progress = progress or Progress()
    make_env = lambda: spec.make_env(cfg.env.options)  # noqa: E731
    reward_fn = spec.make_reward(cfg.env.options)
    params = SamplingParams(ro.temperature, ro.top_p, ro.max_new_tokens, make_env().format.stop_strings)
    budget = Budget(ro.max_turns, ro.max_new_tokens, ro.max_episode_tokens, ro.step_timeout_s, ro.max_concurrent)
    memory = check_memory(model, cfg, _prompt_tokens(spec, cfg, tokenizer))  # before optimizer, reference, critic
    parts = rl_parts(model, tokenizer, spec, cfg)
    original = dataclasses.asdict(rl)  # remediations change rl in place; states keep what they changed
    if saved is not None and progress.rl_step > 0:
        _resume_rl(parts, saved, store, rl)
    else:
        logger.log({"step": 0, "stage": "event", "event": "memory_estimate", **memory})
        if store is not None and parts.ref_model is not None:
            store.save_reference(parts.ref_model)
    bar = tqdm(range(progress.rl_step + 1, rl.steps + 1), desc="grpo", disable=not cfg.log.progress)

    def collect(n: int, seed: int):
        groups, stats = rollout(engine, tokenizer, make_env, parts.sampler.sample(n), rl.group_size, params, budget,
                                seed=seed, greedy_per_group=ro.greedy_per_group)
        groups = score_groups(reward_fn, groups, ro.step_timeout_s)
        if rl.process_reward:  # per-turn rewards on top of the outcome (credited turn by turn)
            groups = apply_process_rewards(process_reward(rl.process_reward), groups)
        parts.sampler.update(groups)
        return groups, stats

    h = cfg.hindsight
    hindsight_options = HindsightOptions(h.reveal_answer,
                                         reference_solutions(spec, cfg.env.options) if h.reveal_solution else None,
                                         h.restart, h.grounded, h.min_reward)

    def correct(groups, seed: int) -> HindsightResult:
        oracle = h.teacher == DEMONSTRATION_TEACHER
        failed = failed_episodes(groups, h.min_reward, h.max_per_step, one_per_task=oracle or h.restart == "start")
        if oracle:
            return demonstration_corrections(spec, cfg.env.options, tokenizer, failed)
        return hindsight_corrections(parts.hindsight_teacher or engine, tokenizer, make_env, reward_fn, failed, params,
                                     budget, hindsight_options, seed)

    for step in bar:
        record = _rl_step(step, model, tokenizer, engine, parts, cfg, logger, collect, correct)
        _watch(parts.monitor, parts.remedies, record, rl, logger)
        _count_bad_step(progress, record, rl, logger)
        if cfg.eval.every and step % cfg.eval.every == 0 and step < rl.steps:  # the last: train() evaluates
            _eval_during_rl(step, engine, tokenizer, spec, cfg, logger)
        progress.rl_step = step
        if store is not None and (step % cfg.checkpoint.every == 0 or step == rl.steps):
            progress.remedied = {k: v for k, v in dataclasses.asdict(rl).items() if v != original[k]}
            progress.logger_step, progress.engine_version = logger.global_step, engine.version
            progress.metric = record.get(cfg.checkpoint.best_metric) if cfg.checkpoint.best_metric else None
            store.save(f"rl-step{step}", progress, model, parts.optimizer, parts.critic, config=cfg, extras={
                "sampler": parts.sampler.state_dict(), "monitor": dataclasses.asdict(parts.monitor),
                "healthy": parts.remedies.healthy})
        bar.set_postfix(reward=f"{record['reward_mean']:.2f}", acc=f"{record['accuracy']:.2f}")
    if parts.critic is not None:
        parts.critic.save(cfg.run_dir / "checkpoints" / "critic")


def _eval_during_rl(step: int, engine, tokenizer, spec: EnvSpec, cfg: Config, logger: MetricsLogger) -> None:
    """Held-out accuracy after `step` (greedy, as the final evaluation). The RNG streams are put back
    afterwards, so a run with a learning curve trains exactly as one without."""
    rng = capture_rng()
    t0 = time.perf_counter()
    result = evaluate(engine, tokenizer, spec, cfg, label=f"rl step {step}")
    restore_rng(rng)
    logger.log({"step": step, "stage": "eval", "model": f"rl-step{step}", **accuracies(result),
                "time_eval_s": round(time.perf_counter() - t0, 1)})


def _prompt_tokens(spec: EnvSpec, cfg: Config, tokenizer) -> int:
    env = spec.make_env(cfg.env.options)
    task = spec.tasks("train", 1, cfg.rl.seed)[0]
    return len(tokenizer.encode(env.format.render_prompt(env.reset(task), env.tool_schemas), add_special_tokens=False))


def _rl_step(step: int, model, tokenizer, engine, parts: RLParts, cfg: Config, logger: MetricsLogger, collect,
             correct) -> dict:
    """One RL step: roll out, score, (hindsight-correct failures,) credit, update, sync the sampler;
    returns (and logs) its record."""
    rl = cfg.rl
    t0 = time.perf_counter()
    _set_lr(parts.optimizer, rl, step)
    groups, sampled, stats = _collect(collect, rl, seed=rl.seed * 1_000_003 + step)
    groups = keep_top_spread(groups, rl.variance_keep)
    metrics = rollout_metrics(sampled, cfg.rollout.greedy_per_group)
    advantages = []
    if sampled and all(t.error for g in sampled for t in g.trajectories):
        example = next(t.error for g in sampled for t in g.trajectories)
        warnings.warn(f"RL step {step}: every episode failed ({example}); no update this step", stacklevel=2)
        logger.log({"step": step, "stage": "event", "event": "step_skipped", "reason": "every episode failed",
                    "example_error": example})
        groups = []
    if rl.train_observations:  # the masking ablation; metrics and files keep the real turns
        groups = [observations_as_actions(g) for g in groups]
    targets = None
    if groups:  # dynamic sampling can come back empty-handed: nothing to train on this step
        kl_rewards = (kl_token_rewards(parts.ref_model or model, groups, cfg, tokenizer.pad_token_id)
                      if rl.kl_coef > 0 and rl.kl_mode == "reward" else None)
        values = (critic_values(model, parts.critic, groups, cfg, tokenizer.pad_token_id)
                  if parts.critic else None)
        credit = compute_credit(groups, rl, outcome_rewards(groups, cfg), kl_rewards, values)
        advantages = credit.advantages
        targets = CriticTargets(parts.critic, credit.returns, credit.values) if parts.critic else None
    fixes = correct(sampled, rl.seed * 1_000_033 + step) if cfg.hindsight.coef > 0 else None
    if fixes is not None:
        metrics.update(hindsight_attempts=fixes.attempts, hindsight_verified=len(fixes.corrections),
                       hindsight_rate=len(fixes.corrections) / max(fixes.attempts, 1))
        write_trajectories(cfg.run_dir / "trajectories" / "hindsight.jsonl", fixes.corrections, tokenizer, None, step)
    metrics.update(rl_update(model, parts.optimizer, groups, advantages, cfg, tokenizer.pad_token_id,
                             parts.ref_model, targets, parts.teachers, fixes.corrections if fixes else ()))
    version = engine.sync_weights()
    trajs = [t for g in groups for t in g.trajectories]
    k = cfg.log.trajectories_per_step
    write_trajectories(cfg.run_dir / "trajectories" / "rl.jsonl", trajs[:k], tokenizer, advantages[:k], step)
    record = {"step": step, "stage": "rl", **metrics, **parts.sampler.metrics(), "weight_version": version,
              "lr": parts.optimizer.param_groups[0]["lr"],
              "time_rollout_s": stats.seconds, "time_step_s": time.perf_counter() - t0,
              "tokens_per_s_rollout": stats.generated_tokens / max(stats.seconds, 1e-9),
              "groups_sampled": len(sampled), "groups_kept": len(groups), "mem_peak_rss_gb": peak_rss_gb()}
    logger.log(record)
    return record


class TrainingDiverged(RuntimeError):
    """`rl.max_bad_steps` consecutive steps had a non-finite loss or gradient."""


def _count_bad_step(progress: Progress, record: dict, rl, logger: MetricsLogger) -> None:
    """A step whose update was skipped for a non-finite loss or gradient is an event; too many in a
    row stop the run with the evidence (the weights are still the last finite ones)."""
    if not record.get("nonfinite_minibatches"):
        progress.bad_steps = 0
        return
    progress.bad_steps += 1
    logger.log({"step": record["step"], "stage": "event", "event": "nonfinite_update_skipped",
                "consecutive": progress.bad_steps, "loss": record.get("loss"), "grad_norm": record.get("grad_norm")})
    if progress.bad_steps >= rl.max_bad_steps:
        raise TrainingDiverged(f"{progress.bad_steps} consecutive RL steps had a non-finite loss or gradient "
                               f"(last at step {record['step']}: loss={record.get('loss')}, "
                               f"grad_norm={record.get('grad_norm')}); the run stops (rl.max_bad_steps). "
                               "Try a lower rl.lr or model.precision: fp32.")


def _resume_rl(parts: RLParts, saved: SavedState, store: StateStore, rl) -> None:
    """Everything the loop carries, as it was at the saved step."""
    extras = saved.load("extras")
    parts.optimizer.load_state_dict(saved.load("optimizer"))
    if parts.critic is not None:
        parts.critic.load_state_dict(saved.load("critic"))
    if parts.ref_model is not None:
        parts.ref_model.load_state_dict(torch.load(store.reference_path, weights_only=True))
    parts.sampler.load_state_dict(extras["sampler"])
    for k, v in extras["monitor"].items():
        setattr(parts.monitor, k, v)
    parts.remedies.healthy = extras["healthy"]
    for k, v in saved.progress.remedied.items():
        setattr(rl, k, v)


def _watch(monitor: CollapseMonitor, remedies: Remedies, record: dict, rl, logger: MetricsLogger) -> None:
    """The echo-trap monitor after each step: a warning and its remediations become events; a quiet
    step is the new healthy point a rollback returns to."""
    warning = monitor.update(record)
    if warning is None:
        if "rollback" in rl.collapse_actions:
            remedies.mark_healthy()
        return
    for event in [warning, *remedies.apply(rl.collapse_actions)]:
        logger.log({"step": record["step"], "stage": "event", **event})


def _collect(collect, rl, seed: int):
    """(groups to train on, every group sampled, rollout stats) for one step.

    With `rl.dynamic_sampling` (DAPO), groups whose rewards are all equal are dropped and fresh tasks
    are rolled out in their place, up to `rl.max_refill_rounds` extra rounds; the step then trains
    on the groups with signal it has (at most tasks_per_step). Without it, every group is kept.
    """
    groups, stats = collect(rl.tasks_per_step, seed)
    if not rl.dynamic_sampling:
        return groups, groups, stats
    sampled, seconds, generated = list(groups), stats.seconds, stats.generated_tokens
    kept = _with_spread(groups)
    for r in range(1, rl.max_refill_rounds + 1):
        if len(kept) >= rl.tasks_per_step:
            break
        more, st = collect(rl.tasks_per_step - len(kept), seed + 7919 * r)
        sampled += more
        seconds, generated = seconds + st.seconds, generated + st.generated_tokens
        kept += _with_spread(more)
    return kept[: rl.tasks_per_step], sampled, RolloutStats(seconds, sum(len(g.trajectories) for g in sampled),
                                                            generated)


def _with_spread(groups):
    keep = dynamic_sampling_keep(torch.tensor([g.rewards for g in groups], dtype=torch.float32)) if groups else []
    return [g for g, k in zip(groups, keep) if k]


def _optimizer(model, critic, rl):
    """AdamW over the trainable policy parameters, plus the critic (head, and its own backbone if it
    has one) at its own learning rate. Each group keeps its `base_lr` (the schedule scales it; the
    lower_lr remediation halves it) inside the optimizer, so its state_dict is the whole schedule state."""
    groups = [{"params": [p for p in model.parameters() if p.requires_grad], "lr": rl.lr, "base_lr": rl.lr}]
    if critic is not None:
        groups.append({"params": [p for p in critic.parameters() if p.requires_grad], "lr": rl.critic_lr,
                       "base_lr": rl.critic_lr})
    return adamw(groups, rl.lr)


def lr_factor(schedule: str, step: int, steps: int, warmup: int) -> float:
    """The multiplier of base_lr at RL step `step` (1-based): linear warmup over `warmup` steps, then
    constant, or linear / cosine decay towards 0 over the remaining steps (never reaching it)."""
    if step <= warmup:
        return step / warmup
    progress = (step - warmup) / (steps - warmup + 1)
    if schedule == "linear":
        return 1.0 - progress
    if schedule == "cosine":
        return 0.5 * (1.0 + math.cos(math.pi * progress))
    return 1.0


def _set_lr(optimizer, rl, step: int) -> None:
    factor = lr_factor(rl.lr_schedule, step, rl.steps, rl.warmup_steps)
    for g in optimizer.param_groups:
        g["lr"] = g["base_lr"] * factor


def _reference(model):
    """Frozen copy of the policy as it enters RL (the SFT model): the KL anchor."""
    import copy

    ref = copy.deepcopy(model)
    ref.eval()
    for p in ref.parameters():
        p.requires_grad_(False)
    return ref
