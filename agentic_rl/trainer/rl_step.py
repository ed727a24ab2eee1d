"""One RL step, top to bottom: sample tasks -> roll out -> score (the producer, ahead of the step by
at most `rl.max_staleness` versions) -> filter -> credit -> update -> sync the sampler -> log one
`StepRecord`.

What crosses from sampling to training is one `RolloutBatch` (`types.py`): the scored groups —
each trajectory with its exact token ids, its loss mask and the sampler's logprobs — and the policy
version that sampled them. The update adds the credit (`trainer/credit.py`) and trains the loss
terms (`trainer/loss_terms.py`); the engine then gets the new weights. Whatever samples (this
process's engine, a served one, a stale worker) meets the trainer at that batch.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from agentic_rl.algorithms.filters import keep_top_spread
from agentic_rl.data.curriculum import TaskSampler
from agentic_rl.engines.probe import SyncProbe, checked_sync
from agentic_rl.envs.spec import EnvSpec
from agentic_rl.models.memory import step_memory
from agentic_rl.monitor.hacking import HackingMonitor
from agentic_rl.monitor.logger import MetricsLogger
from agentic_rl.monitor.metrics import reward_spread, rollout_metrics
from agentic_rl.monitor.trajectories import write_trajectories
from agentic_rl.rewards.hacking import hacking_rates
from agentic_rl.rollout.backends import Episodes, Rollouts
from agentic_rl.rollout.hindsight import (
    DEMONSTRATION_TEACHER,
    RESTARTS,
    HindsightOptions,
    HindsightResult,
    demonstration_corrections,
    failed_episodes,
    hindsight_corrections,
)
from agentic_rl.trainer.config import Config, RLConfig
from agentic_rl.trainer.credit import Scorer, assign_credit, with_unadvantaged
from agentic_rl.trainer.distributed import DataParallel
from agentic_rl.trainer.loss_terms import Loss, build_loss
from agentic_rl.trainer.producer import Producer, scored
from agentic_rl.trainer.schedule import set_lr
from agentic_rl.trainer.stats import StepRecord
from agentic_rl.trainer.teachers import Teachers
from agentic_rl.trainer.update import UpdateBatch, rl_update
from agentic_rl.types import RolloutBatch, TrajectoryGroup


@dataclass(kw_only=True)
class RLRun:
    """What the RL loop carries from step to step (and so what a state checkpoint must hold). Not
    frozen: a remedy replaces `cfg` and the loss (`reconfigure`), and the loop starts the producer
    on the run it reads."""

    cfg: Config  # replaced, never changed, when a remedy changes a knob
    model: torch.nn.Module
    tokenizer: object
    engine: object  # the policy's sampler; `sync_weights()` after every update
    spec: EnvSpec
    episodes: Episodes
    sampler: TaskSampler
    optimizer: torch.optim.Optimizer
    loss: Loss
    scorer: Scorer  # the forward passes credit needs (reference, critic)
    logger: MetricsLogger
    teachers: Teachers | None = None  # on-policy distillation
    hindsight: HindsightOptions | None = None  # None: no hindsight corrections
    hindsight_engine: object = None  # the engine that writes corrections; None = the policy's own
    probe: SyncProbe | None = None  # checks every weight sync (`engines/probe.py`); None = unchecked
    producer: Producer | None = None  # the steps' rollouts (`producer.py`), started by the RL loop
    parallel: DataParallel | None = None  # this rank's share of data-parallel training (`distributed.py`)
    rollouts: Rollouts | None = None  # where the steps' episodes are sampled (`trainer/rollouts.py`)
    hacking: HackingMonitor = field(default_factory=HackingMonitor)  # warns when a hacking rate climbs

    def reconfigure(self, cfg: Config) -> None:
        """Go on with `cfg` (a remedy changed a knob): the loss terms are rebuilt from it."""
        if cfg != self.cfg:
            self.cfg = cfg
            self.loss = build_loss(cfg, self.model, self.scorer.reference, self.scorer.critic, self.teachers)


def rl_step(run: RLRun, step: int) -> StepRecord:
    """One step of RL; logs and returns its record."""
    cfg, rl = run.cfg, run.cfg.rl
    t0 = time.perf_counter()
    set_lr(run.optimizer, rl.optim, step, rl.steps)
    # 1-3. the step's tasks, rolled out and scored (`collect`) by the producer (`producer.py`), with
    # weights at most rl.max_staleness versions older than those this step updates
    produced, waited = run.producer.take(step)
    kept, sampled, stats, version = produced.kept, produced.sampled, produced.stats, produced.version
    staleness = batch_staleness(rl, step, kept, version, run.engine.version)
    policy_episodes = [t for g in scored(sampled) for t in g.trajectories]
    rollout_row = {**rollout_metrics(scored(sampled)), **infra_failures(sampled, step, rl.infra_warn_frac),
                   **hacking_rates(policy_episodes), **(produced.reward_metrics or {}),
                   "time_wait_data_s": waited, "time_wait_weights_s": produced.waited_s,
                   **(produced.partial_metrics or {})}
    if rl.max_staleness:
        rollout_row.update(staleness)
    # 4. filter: a group needs two scored episodes (the machine's failures are not the policy's);
    # StarPO-S keeps the groups with the most reward spread
    scorable = [g for g in kept if len(scored([g])[0].trajectories) >= 2] if kept else []
    groups = keep_top_spread(scorable, rl.filters.variance_keep)
    # 5. credit: rewards -> per-token advantages (and a critic's targets); a distillation teacher
    # scores every token, so the groups the filter left out still train, with no advantage
    credit = assign_credit(groups, run.scorer, rl.algorithm, cfg.rollout.max_episode_tokens)
    if run.teachers is not None and credit.returns is None:
        groups, credit = with_unadvantaged(scorable, groups, credit)
    # hindsight: failed episodes, corrected and verified, join the update as SFT targets
    fixes = correct_failures(run, sampled, seed=rl.seed * 1_000_033 + step)
    if fixes is not None:
        rollout_row.update(hindsight_attempts=fixes.attempts, hindsight_verified=len(fixes.corrections),
                           hindsight_rate=len(fixes.corrections) / max(fixes.attempts, 1))
    if fixes is not None and run.parallel.world.main:
        write_trajectories(cfg.run_dir / "trajectories" / "hindsight.jsonl", fixes.corrections, run.tokenizer,
                           None, step)
    # 6. update
    batch = UpdateBatch(RolloutBatch(tuple(groups), version), credit, fixes.corrections if fixes else ())
    update = rl_update(run.model, run.optimizer, batch, run.loss, rl.optim, run.tokenizer.pad_token_id,
                       run.scorer.critic, run.parallel)
    # 7. the sampler gets the new weights, checked by the probe
    t_sync = time.perf_counter()
    run.producer.before_sync(step)  # the batches the old weights may still sample are done
    waited_sync = time.perf_counter() - t_sync
    version, gap = sync_samplers(run)
    update_row = {**update.metrics, "time_sync_s": time.perf_counter() - t_sync, "time_wait_sync_s": waited_sync}
    if gap is not None:
        update_row["sync_probe_gap"] = gap
    # 8. log
    trajs = [t for g in groups for t in g.trajectories]
    k = cfg.log.trajectories_per_step
    if run.parallel.world.main:
        write_trajectories(cfg.run_dir / "trajectories" / "rl.jsonl", trajs[:k], run.tokenizer,
                           credit.advantages[:k], step)
    record = StepRecord(step=step, rollout=rollout_row, update=update_row, sampler=produced.sampler_metrics,
                        weight_version=version, lr=run.optimizer.param_groups[0]["lr"], rollout_stats=stats,
                        seconds=time.perf_counter() - t0, groups_sampled=len(sampled), groups_kept=len(groups),
                        memory=step_memory(cfg.model.release_memory, cfg.log.memory_census),
                        rewards=reward_spread(scored(sampled)), health=update.health)
    run.logger.log(record.row())
    return record


def sync_samplers(run: RLRun) -> tuple[int, float | None]:
    """The policy's engine, and the backend's own samplers (the Ray workers), get the trained
    weights, each checked by the probe: the new version, and the probe's largest gap on the
    backend's samplers, else on the engine."""
    with run.producer.engine_lock:
        version, gap = checked_sync(run.engine, run.model, run.probe)
        own = run.rollouts.sync(run.model, version, run.probe)
    return version, gap if own is None else own


def batch_staleness(rl: RLConfig, step: int, kept: Sequence[TrajectoryGroup], sampled: int, current: int) -> dict[str, float]:
    """The batch's staleness metrics, checked against their bound: per token with partial rollouts
    (each turn's own version; bound k + max_versions - 1), else the batch's one version (bound k)."""
    if rl.partial_rollout.turns_per_version > 0:
        return token_staleness(step, kept, current, rl.max_staleness + rl.partial_rollout.max_versions - 1)
    return {"staleness": staleness_of(step, sampled, current, rl.max_staleness)}


def staleness_of(step: int, sampled: int, current: int, bound: int, what: str = "a batch",
                 rule: str = "rl.max_staleness") -> int:
    """How many versions older than `current` the weights that sampled `what` (`sampled`) are;
    raises past `bound` (`rule` says where it comes from), and below 0 (sampled by weights the
    trainer has not made yet: a sampler whose count is not the trainer's)."""
    staleness = current - sampled
    if not 0 <= staleness <= bound:
        raise RuntimeError(f"RL step {step}: {what} sampled by version {sampled} trains at version {current}: "
                           f"{staleness} versions stale ({rule} {bound})")
    return staleness


def token_staleness(step: int, groups: Sequence[TrajectoryGroup], current: int, bound: int) -> dict[str, float]:
    """Partial rollouts: per trained token, how many versions older than `current` the weights that
    sampled it (its turn's `Turn.version`) are; the max (`staleness`) and the mean over the batch's
    trained tokens. Raises as `staleness_of` for a token past `bound` (k + max_versions - 1)."""
    worst, total, tokens = 0, 0, 0
    for g in groups:
        for t in g.trajectories:
            if t.infra_failure is not None:
                continue
            for turn in t.turns:
                if turn.trained and turn.action_ids:
                    worst = max(worst, staleness_of(step, turn.version, current, bound, "a token",
                                                    "rl.max_staleness + rl.partial_rollout.max_versions - 1 ="))
                    total, tokens = total + (current - turn.version) * len(turn.action_ids), tokens + len(turn.action_ids)
    return {"staleness": worst, "staleness_mean": total / tokens if tokens else 0.0}


class InfrastructureFailure(RuntimeError):
    """Every episode of an RL step failed on the machine's side: nothing is left to train on."""


def infra_failures(sampled: Sequence[TrajectoryGroup], step: int, warn_frac: float) -> dict[str, float]:
    """`infra_failures/<kind>` counts and their share of the step's episodes. Over `warn_frac` of them
    warns; all of them stops the run, with an example of what failed."""
    trajs = [t for g in sampled for t in g.trajectories]
    failed = [t for t in trajs if t.infra_failure is not None]
    if not trajs:
        return {}
    if len(failed) == len(trajs):
        raise InfrastructureFailure(
            f"RL step {step}: every episode ({len(trajs)}) failed on the machine's side, not the policy's "
            f"({failed[0].infra_failure}: {failed[0].error}); check the env, its tools and the reward")
    frac = len(failed) / len(trajs)
    if frac > warn_frac:
        warnings.warn(f"RL step {step}: {len(failed)} of {len(trajs)} episodes failed on the machine's side "
                      f"({failed[0].infra_failure}: {failed[0].error}); they are left out of training", stacklevel=3)
    kinds = {f"infra_failures/{t.infra_failure}": 0.0 for t in failed}
    for t in failed:
        kinds[f"infra_failures/{t.infra_failure}"] += 1.0
    return {**dict(sorted(kinds.items())), "infra_failure_frac": frac}


def correct_failures(run: RLRun, sampled: Sequence[TrajectoryGroup], seed: int) -> HindsightResult | None:
    """Hindsight corrections of the step's failed episodes (None when hindsight is off): the env's
    own demonstrations, or continuations by a hinted teacher, verified by the env's reward."""
    if run.hindsight is None:
        return None
    h, options = run.cfg.hindsight, run.cfg.env.options
    oracle = h.teacher == DEMONSTRATION_TEACHER
    one_per_task = oracle or RESTARTS.get(h.restart).one_per_task
    failed = failed_episodes(sampled, h.min_reward, h.max_per_step, one_per_task=one_per_task)
    if oracle:
        return demonstration_corrections(run.spec, options, run.tokenizer, failed)
    ep = run.episodes
    with run.producer.engine_lock:  # the policy's engine may write them, and the producer samples on it
        return hindsight_corrections(run.hindsight_engine or run.engine, run.tokenizer, ep, failed, run.hindsight,
                                     seed)
