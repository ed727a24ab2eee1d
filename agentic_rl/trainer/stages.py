"""The stages `train()` calls: SFT on demonstrations and the GRPO loop, each logging its steps."""

from __future__ import annotations

import time

import torch
from tqdm import tqdm

from agentic_rl.algorithms.dapo import dynamic_sampling_keep
from agentic_rl.data.curriculum import make_sampler
from agentic_rl.data.sft_data import load_sft_file
from agentic_rl.engines.base import SamplingParams
from agentic_rl.envs.registry import EnvSpec
from agentic_rl.models.lora import is_lora
from agentic_rl.monitor.collapse import CollapseMonitor, Remedies, keep_top_spread
from agentic_rl.monitor.logger import MetricsLogger
from agentic_rl.monitor.metrics import rollout_metrics
from agentic_rl.monitor.trajectories import write_trajectories
from agentic_rl.rewards.process import PROCESS_REWARDS, apply_process_rewards
from agentic_rl.rewards.scoring import score_groups
from agentic_rl.rollout.demos import demonstrate
from agentic_rl.rollout.loop import Budget, RolloutStats, rollout
from agentic_rl.trainer.config import Config
from agentic_rl.trainer.credit import (
    compute_credit,
    critic_values,
    kl_token_rewards,
    observations_as_actions,
    outcome_rewards,
)
from agentic_rl.trainer.critic import make_critic
from agentic_rl.trainer.rl import CriticTargets, rl_update
from agentic_rl.trainer.sft import sft_loss, sft_train


def sft_trajectories(spec: EnvSpec, cfg: Config, tokenizer) -> list:
    """The SFT data: a file (`sft.data`) or the env's demonstrations, capped at `sft.examples`."""
    s = cfg.sft
    if s.data:
        env = spec.make_env(cfg.env.options)
        data = load_sft_file(s.data, env.format, tokenizer, env.tool_schemas, s.min_reward)
        return data[: s.examples] if s.examples else data
    if spec.demonstration is None:
        raise ValueError(f"env {spec.name!r} has no demonstrations: give sft.data or set sft.examples: 0")
    return [demonstrate(spec, cfg.env.options, t, tokenizer)[1] for t in spec.tasks("train", s.examples, s.seed)]


def run_sft(model, tokenizer, spec: EnvSpec, cfg: Config, logger: MetricsLogger) -> list[float]:
    """Trains, logs every step (and the held-out loss), returns the training losses."""
    s = cfg.sft
    data = sft_trajectories(spec, cfg, tokenizer)
    cut = int(len(data) * s.heldout)
    held, train_data = data[:cut], data[cut:]
    total = s.epochs * -(-len(train_data) // (s.batch_size * s.grad_accum))
    bar = tqdm(total=total, desc="sft", disable=not cfg.log.progress)
    losses: list[float] = []

    def on_step(step: int, metrics: dict) -> None:
        bar.update(1)
        bar.set_postfix(loss=f"{metrics['loss']:.3f}")
        losses.append(metrics["loss"])
        logger.log({"step": step, "stage": "sft", **metrics, "time_train_s": metrics["time_step_s"]})

    sft_train(model, train_data, s.lr, s.batch_size, s.epochs, tokenizer.pad_token_id, cfg.model.precision, s.seed,
              on_step, s.grad_accum, s.pack)
    bar.close()
    if held:
        logger.log({"step": len(losses), "stage": "sft_eval", "heldout_loss": sft_loss(
            model, held, tokenizer.pad_token_id, cfg.model.precision), "heldout_examples": len(held)})
    return losses


def run_rl(model, tokenizer, engine, spec: EnvSpec, cfg: Config, logger: MetricsLogger) -> None:
    rl, ro = cfg.rl, cfg.rollout
    make_env = lambda: spec.make_env(cfg.env.options)  # noqa: E731
    reward_fn = spec.make_reward(cfg.env.options)
    params = SamplingParams(ro.temperature, ro.top_p, ro.max_new_tokens, make_env().format.stop_strings)
    budget = Budget(ro.max_turns, ro.max_new_tokens, ro.max_episode_tokens)
    sampler = make_sampler(rl.task_sampler, spec.tasks("train", rl.task_pool * rl.steps * rl.tasks_per_step, rl.seed),
                           seed=rl.seed)
    critic = make_critic(rl.critic, model, tokenizer, rl.critic_model)
    optimizer = _optimizer(model, critic, rl)
    ref_model = _reference(model) if rl.kl_coef > 0 and not is_lora(model) else None
    bar = tqdm(range(1, rl.steps + 1), desc="grpo", disable=not cfg.log.progress)
    monitor, remedies = CollapseMonitor(window=rl.collapse_window), Remedies(rl, optimizer, model)

    def collect(n: int, seed: int):
        groups, stats = rollout(engine, tokenizer, make_env, sampler.sample(n), rl.group_size, params, budget, seed=seed)
        groups = score_groups(reward_fn, groups)
        if rl.process_reward:  # per-turn rewards on top of the outcome (credited turn by turn)
            groups = apply_process_rewards(PROCESS_REWARDS.get(rl.process_reward), groups)
        sampler.update(groups)
        return groups, stats

    for step in bar:
        t0 = time.perf_counter()
        groups, sampled, stats = _collect(collect, rl, seed=rl.seed * 1_000_003 + step)
        groups = keep_top_spread(groups, rl.variance_keep)
        metrics = rollout_metrics(sampled)
        advantages = []
        if rl.train_observations:  # the masking ablation; metrics and files keep the real turns
            groups = [observations_as_actions(g) for g in groups]
        if groups:  # dynamic sampling can come back empty-handed: nothing to train on this step
            kl_rewards = (kl_token_rewards(ref_model or model, groups, cfg, tokenizer.pad_token_id)
                          if rl.kl_coef > 0 and rl.kl_mode == "reward" else None)
            values = critic_values(model, critic, groups, cfg, tokenizer.pad_token_id) if critic else None
            credit = compute_credit(groups, rl, outcome_rewards(groups, cfg), kl_rewards, values)
            advantages = credit.advantages
            targets = CriticTargets(critic, credit.returns, credit.values) if critic else None
        metrics.update(rl_update(model, optimizer, groups, advantages, cfg, tokenizer.pad_token_id, ref_model,
                                 targets if groups else None))
        version = engine.sync_weights()
        trajs = [t for g in groups for t in g.trajectories]
        k = cfg.log.trajectories_per_step
        write_trajectories(cfg.run_dir / "trajectories" / "rl.jsonl", trajs[:k], tokenizer, advantages[:k], step)
        record = {"step": step, "stage": "rl", **metrics, **sampler.metrics(), "weight_version": version,
                  "time_rollout_s": stats.seconds, "time_step_s": time.perf_counter() - t0,
                  "tokens_per_s_rollout": stats.generated_tokens / max(stats.seconds, 1e-9),
                  "groups_sampled": len(sampled), "groups_kept": len(groups)}
        logger.log(record)
        _watch(monitor, remedies, record, rl, logger)
        bar.set_postfix(reward=f"{metrics['reward_mean']:.2f}", acc=f"{metrics['accuracy']:.2f}")
    if critic is not None:
        critic.save(cfg.run_dir / "checkpoints" / "critic")


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
    has one) at its own learning rate."""
    groups = [{"params": [p for p in model.parameters() if p.requires_grad], "lr": rl.lr}]
    if critic is not None:
        groups.append({"params": [p for p in critic.parameters() if p.requires_grad], "lr": rl.critic_lr})
    return torch.optim.AdamW(groups, weight_decay=0.0)


def _reference(model):
    """Frozen copy of the policy as it enters RL (the SFT model): the KL anchor."""
    import copy

    ref = copy.deepcopy(model)
    ref.eval()
    for p in ref.parameters():
        p.requires_grad_(False)
    return ref
