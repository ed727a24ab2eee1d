"""The update's statistics: one small dataclass that adds, and the step's metrics row it becomes.

Every micro-batch (and every loss term) returns an `UpdateStats` of sums over its trained tokens;
the update adds them up; `metrics()` turns the sums into per-token and per-optimizer-step means, and
`health()` into the typed values the RL loop decides on (`UpdateHealth`, in the step's `StepRecord`
beside the sampled rewards' spread).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from agentic_rl.monitor.collapse import Indicators
from agentic_rl.monitor.metrics import RewardSpread
from agentic_rl.rollout.loop import RolloutStats


@dataclass(frozen=True, kw_only=True)
class UpdateHealth:
    """What the RL loop decides on of an update (the collapse monitor, the non-finite-update count)."""

    loss: float  # the objective optimized, a mean over optimizer steps
    grad_norm: float  # a mean over optimizer steps
    entropy: float  # per trained token (0 when no token was trained)
    nonfinite_minibatches: int  # optimizer steps skipped for a non-finite gradient


@dataclass
class UpdateStats:
    loss: float = 0.0  # the objective optimized (every term, hindsight included), summed over micro-batches; a mean over optimizer steps in metrics()
    entropy: float = 0.0  # sums over trained tokens from here on
    kl: float = 0.0
    opd_kl: float = 0.0
    hindsight_nll: float = 0.0  # summed over the optimizer steps that had corrections
    clip_low: float = 0.0
    clip_high: float = 0.0
    tokens: float = 0.0
    engine_lp_diff: float = 0.0  # |trainer logprob - sampler logprob|
    ratio: float = 0.0
    ratio_max: float = 0.0  # a max, not a sum
    value_loss: float = 0.0  # summed over micro-batches, like loss
    value_sq_err: float = 0.0
    value_clip: float = 0.0
    nonfinite_minibatches: int = 0
    # the rollout correction, counted on each row's first pass: |log pi_trainer - log pi_sampler|
    mismatch_abs: float = 0.0
    mismatch_max: float = 0.0  # a max, not a sum
    mismatch_kl: float = 0.0
    mismatch_tokens: float = 0.0
    corrected_clipped: float = 0.0  # tokens whose weight tis truncated
    corrected_masked: float = 0.0  # tokens given weight 0 (mis, geo_mask)
    corrected_masked_rows: float = 0.0
    corrected_rows: float = 0.0
    # entropy and trained tokens by the index of the turn a token belongs to
    entropy_by_turn: dict[int, float] = field(default_factory=dict)
    tokens_by_turn: dict[int, float] = field(default_factory=dict)
    grad_norms: list[float] = field(default_factory=list)  # one per optimizer step

    def add(self, other: UpdateStats) -> None:
        """In place: `other`'s sums into these (in the order the update produced them)."""
        for f in fields(self):
            mine, theirs = getattr(self, f.name), getattr(other, f.name)
            if f.name in ("ratio_max", "mismatch_max"):
                setattr(self, f.name, max(mine, theirs))
            elif isinstance(mine, dict):
                for k, v in theirs.items():
                    mine[k] = mine.get(k, 0.0) + v
            elif isinstance(mine, list):
                mine.extend(theirs)
            else:
                setattr(self, f.name, mine + theirs)

    def health(self) -> UpdateHealth:
        steps = max(len(self.grad_norms), 1)
        return UpdateHealth(loss=self.loss / steps, grad_norm=sum(self.grad_norms) / steps,
                            entropy=self.entropy / max(self.tokens, 1.0),
                            nonfinite_minibatches=self.nonfinite_minibatches)

    def metrics(self, critic: bool, distill: bool, hindsight: bool) -> dict[str, float]:
        """Per-token means over trained tokens, per-step means over optimizer steps."""
        n = max(self.tokens, 1.0)
        steps = max(len(self.grad_norms), 1)
        health = self.health()
        out = {
            "loss": health.loss,
            "entropy": health.entropy,
            "kl": self.kl / n,
            **({"opd_kl": self.opd_kl / n} if distill else {}),
            **({"hindsight_nll": self.hindsight_nll} if hindsight else {}),
            "clip_frac": (self.clip_low + self.clip_high) / n,
            "clip_frac_low": self.clip_low / n,
            "clip_frac_high": self.clip_high / n,
            "grad_norm": health.grad_norm,
            "optimizer_steps": len(self.grad_norms) - self.nonfinite_minibatches,
            "nonfinite_minibatches": self.nonfinite_minibatches,
            "trained_tokens": self.tokens,
            "engine_logprob_abs_diff": self.engine_lp_diff / n,
            "ratio_mean": self.ratio / n,
            "ratio_max": self.ratio_max,
            **self._mismatch(),
            **{f"entropy_turn{k}": self.entropy_by_turn[k] / v for k, v in self.tokens_by_turn.items() if v},
        }
        if critic:
            out.update(value_loss=self.value_loss / steps, value_mse=self.value_sq_err / n,
                       value_clip_frac=self.value_clip / n)
        return out

    def _mismatch(self) -> dict[str, float]:
        """The sampler-trainer gap (per sampled token) and the rollout correction's share of tokens and
        sequences it truncated or dropped; nothing when no token was trained."""
        if not self.mismatch_tokens:
            return {}
        n, rows = self.mismatch_tokens, max(self.corrected_rows, 1.0)
        return {"mismatch_logprob_abs_mean": self.mismatch_abs / n, "mismatch_logprob_abs_max": self.mismatch_max,
                "mismatch_kl": self.mismatch_kl / n, "correction_clipped_frac": self.corrected_clipped / n,
                "correction_masked_frac": self.corrected_masked / n,
                "correction_masked_seq_frac": self.corrected_masked_rows / rows}


@dataclass(frozen=True, kw_only=True)
class StepRecord:
    """One RL step as `metrics.jsonl` holds it (`row()`), and the typed values the loop decides on
    (`rewards`, `health`: never read back from the rows)."""

    step: int
    rollout: dict[str, float]  # rollout_metrics of every group sampled (+ hindsight counts)
    update: dict[str, float]  # UpdateStats.metrics() + groups_trained, time_train_s
    sampler: dict[str, float]  # the task sampler's (pass rates)
    weight_version: int  # the sampler's weights after the step's sync
    lr: float
    rollout_stats: RolloutStats
    seconds: float  # the whole step
    groups_sampled: int
    groups_kept: int
    memory: dict[str, float]  # `models/memory.step_memory` at the step's end: the peak so far, what stays resident
    rewards: RewardSpread | None  # of the episodes the policy did; None: the machine failed every one
    health: UpdateHealth

    def indicators(self) -> Indicators:
        """What the collapse monitor watches of this step."""
        r = self.rewards
        return Indicators(step=self.step, reward_std=r.std if r else None,
                          frac_zero_std_groups=r.frac_zero_std_groups if r else None,
                          entropy=self.health.entropy, reward_mean=r.mean if r else None)

    def row(self) -> dict:
        return {"step": self.step, "stage": "rl", **self.rollout, **self.update, **self.sampler,
                "weight_version": self.weight_version, "lr": self.lr, "time_rollout_s": self.rollout_stats.seconds,
                "time_step_s": self.seconds,
                "tokens_per_s_rollout": self.rollout_stats.generated_tokens / max(self.rollout_stats.seconds, 1e-9),
                "episodes_per_s_rollout": self.rollout_stats.episodes / max(self.rollout_stats.seconds, 1e-9),
                "time_env_s": self.rollout_stats.env_seconds,
                "groups_sampled": self.groups_sampled, "groups_kept": self.groups_kept, **self.memory}

