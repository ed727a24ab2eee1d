"""The typed recipe: sections of flat dataclasses, each default defined once, validated on load.

A recipe YAML holds the same sections; `--set section.key=value` overrides one field. Unknown keys,
wrong types and out-of-range values fail with one message naming the key.
"""

from __future__ import annotations

import dataclasses
import difflib
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml


class ConfigError(ValueError):
    pass


@dataclass
class ModelConfig:
    name: str = "smollm2"  # "smollm2" (packaged), "tiny", a local HF directory or a hub id
    precision: str = "auto"  # auto | bf16 | fp32: auto = bf16 where a start-up product measures it faster
    lora_rank: int = 0  # 0 = full fine-tune
    lora_alpha: int = 32
    threads: int = 0  # torch threads; 0 = torch's default
    memory_check: bool = True  # stop before RL when its estimated memory exceeds what is available
    gradient_checkpointing: bool = False  # recompute layer activations in the backward: less memory, one more forward of compute


@dataclass
class EnvConfig:
    name: str = "calculator"
    options: dict[str, Any] = field(default_factory=dict)


@dataclass
class RolloutConfig:
    temperature: float = 1.0
    top_p: float = 1.0
    max_turns: int = 4
    max_new_tokens: int = 96  # per turn
    max_episode_tokens: int = 256  # generated tokens per episode
    step_timeout_s: float = 60.0  # an env step (or reward) running longer ends its episode with an error; 0 = no limit
    max_concurrent: int = 0  # episodes decoded at once (each holds a KV cache); 0 = a whole step's tasks x group
    # RL: the first N episodes of each group decoded greedily, trained like the others: the group then
    # ranks the plan the evaluation's greedy decoding will follow against the sampled ones
    greedy_per_group: int = 0


@dataclass
class SFTConfig:
    examples: int = 0  # demonstrations to train on (the env's own, or the first N of `data`); 0 skips SFT
    data: str = ""  # a JSONL of OpenAI-style conversations or of trajectory records; "" = env demonstrations
    min_reward: float = 1.0  # trajectory records: keep episodes scoring at least this (rejection sampling)
    batch_size: int = 8  # trajectories per micro-batch
    grad_accum: int = 1  # micro-batches per optimizer step
    pack: int = 0  # > 0: pack whole conversations into rows of at most this many tokens (batch_size counts rows)
    lr: float = 5e-5
    epochs: int = 1
    # shares of the demonstrated tasks by a task meta field, e.g. {bare: 1, one_step: 1, two_step: 3} with
    # mix_key "family"; empty = the train split's own mix
    mix: dict[str, float] = field(default_factory=dict)
    mix_key: str = "family"
    heldout: float = 0.0  # fraction of the data kept out of training for a held-out loss
    seed: int = 1
    graduation: bool = False  # write the graduation report after SFT (graduation.json)
    require_graduation: bool = False  # stop before RL unless the report says graduated
    min_format: float = 0.9
    max_similarity: float = 0.95  # mean pairwise similarity of samples of one prompt, at most
    max_loss_drop: float = 0.1  # the loss still falling more than this over the last window: not converged
    graduation_prompts: int = 32
    diversity_prompts: int = 8
    diversity_samples: int = 4


@dataclass
class RLConfig:
    steps: int = 0  # 0 skips RL
    tasks_per_step: int = 4
    group_size: int = 8
    minibatches: int = 1  # optimizer steps per rollout batch (PPO minibatches)
    micro_batch_rows: int = 8  # groups smaller than this share a forward pass, up to this many rows
    freeze_layers: int = 0  # the lowest N decoder layers take no gradient in RL (a shorter backward pass)
    task_sampler: str = "uniform"  # uniform | pass_rate | failure_rate (curricula on the pass rate of each task kind)
    task_pool: int = 4  # the sampler draws from task_pool x steps x tasks_per_step training tasks
    # env splits the RL prompts come from, in equal shares; RL needs no demonstration, so a prompt-only
    # split (the calculator's rl_extra) can widen it beyond what SFT saw. Never an eval split.
    splits: list[str] = field(default_factory=lambda: ["train"])
    # shares of the RL prompts by a task meta field, as sft.mix (e.g. {bare: 1, one_step: 1, two_step: 3}
    # with mix_key "family"), taken from the splits' stream; empty = the splits' own mix
    mix: dict[str, float] = field(default_factory=dict)
    mix_key: str = "family"
    lr: float = 1e-6
    lr_schedule: str = "constant"  # constant | linear | cosine: decay over the RL steps after the warmup
    warmup_steps: int = 0  # RL steps of linear warmup from lr / (warmup_steps) to lr
    advantage: str = "grpo"  # grpo | dr_grpo | rloo | reinforce_pp | reinforce_pp_baseline
    advantage_scale: str = "group"  # grpo only: divide by the std of the group, the batch, or none
    policy_loss: str = "ppo_clip"
    aggregation: str = "token-mean"
    clip_low: float = 0.2
    clip_high: float = 0.2
    kl_coef: float = 0.0
    kl_estimator: str = "k3"
    kl_mode: str = "loss"  # loss: a KL term in the loss | reward: a per-token KL penalty in the reward
    entropy_coef: float = 0.0  # > 0 adds an entropy bonus -coef * H to the loss
    overlong_buffer: int = 0  # > 0: DAPO's soft overlong penalty over the last N tokens of the episode budget
    overlong_factor: float = 1.0
    mask_truncated: bool = False  # DAPO's overlong filtering: truncated episodes leave the loss
    process_reward: str = ""  # PROCESS_REWARDS names joined by "+" (e.g. step_signals+operands); "" = outcome only
    train_observations: bool = False  # ablation: tool results are trained on as if sampled (Search-R1 §4)
    epochs: int = 1  # passes over each rollout batch (PPO epochs)
    dynamic_sampling: bool = False  # DAPO: replace groups without reward spread by fresh rollouts
    max_refill_rounds: int = 2
    critic: str = "none"  # none | value_head (a head on the policy) | model (its own transformer); gae needs one
    critic_model: str = ""  # critic: model only; "" = a copy of the policy as RL starts
    critic_lr: float = 1e-4
    vf_coef: float = 0.5  # weight of the value loss
    value_clip: float = 0.2
    gamma: float = 1.0  # discount per sampled token (gae, reinforce_pp, per-turn rewards)
    lam: float = 1.0  # GAE lambda
    max_grad_norm: float = 1.0
    max_bad_steps: int = 3  # consecutive steps with a non-finite loss or gradient (each skipped) before the run stops
    variance_keep: float = 1.0  # StarPO-S: train on this fraction of groups, those with the most reward spread
    collapse_window: int = 3  # steps per rolling window of the echo-trap monitor
    collapse_actions: list[str] = field(default_factory=list)  # remediations on a collapse warning (empty: warn only)
    seed: int = 2


@dataclass
class DistillConfig:
    """On-policy distillation (docs/algorithms/opd.md): teachers score the student's own rollouts."""

    teachers: list[str] = field(default_factory=list)  # models sharing the student's tokenizer; [] = off
    weights: list[float] = field(default_factory=list)  # merge weights; [] = equal
    merge: str = "logits"  # logits (geometric mixture) | probs (arithmetic mixture)
    loss: str = "full"  # full | topk | sampled (reverse-KL estimators) | forward (forward KL)
    topk: int = 32
    coef: float = 1.0  # the OPD term's weight: RL + coef x OPD
    only: bool = False  # OPD alone: the policy-gradient term is dropped (rewards are still logged)
    route_key: str = ""  # a task meta field that routes tasks to one teacher (with `routes`)
    routes: dict[str, int] = field(default_factory=dict)  # meta value -> teacher index; others: all, merged


@dataclass
class HindsightConfig:
    """Hindsight supervision (docs/algorithms/hindsight.md): failures corrected by a hinted teacher."""

    coef: float = 0.0  # > 0: verified corrections join the RL loss as SFT targets with this weight
    max_per_step: int = 4  # failed episodes a step tries to correct
    reveal_answer: bool = True  # the hint includes the reference answer
    reveal_solution: bool = False  # the hint includes the reference solution's tool calls (the env's demonstration)
    restart: str = "failure"  # "failure": the teacher continues from the failure point; "start": rewrites the episode
    grounded: bool = True  # with the answer or solution revealed, keep only corrections whose answer a tool produced
    min_reward: float = 1.0  # an episode below this failed; a correction must reach it
    # "" = the policy itself, conditioned on the hint; "demonstration" = the env's own solution; else a
    # model sharing its tokenizer
    teacher: str = ""


@dataclass
class EvalConfig:
    tasks_per_split: int = 200
    splits: list[str] = field(default_factory=lambda: ["heldout_in", "heldout_out"])
    baselines: bool = True  # also evaluate the untrained model zero-shot and few-shot
    batch_size: int = 64  # episodes decoded together; the splits share batches
    seed: int = 12345
    every: int = 0  # also evaluate every N RL steps (a learning curve in metrics.jsonl); 0 = at the end only


@dataclass
class LogConfig:
    tensorboard: bool = True
    mlflow: str = ""  # a tracking URI (http://...) or a local directory (MLflow file store); "" = off
    wandb: str = ""  # a W&B project name; "" = off (WANDB_MODE=offline keeps it local)
    trajectories_per_step: int = 8  # written to trajectories/*.jsonl
    progress: bool = True


@dataclass
class CheckpointConfig:
    """Resumable state checkpoints (`trainer/state.py`), besides the model checkpoints of each stage."""

    every: int = 1  # RL steps between state checkpoints (and one after baselines, SFT and the last step)
    sft_every: int = 0  # SFT steps between state checkpoints; 0 = only when SFT ends
    keep_last: int = 2  # newest states kept; 0 keeps all
    best_metric: str = ""  # also keep the state with the best value of this RL metric (e.g. reward_mean)
    best_mode: str = "max"  # max | min
    async_save: bool = False  # write states in a background thread from a host copy (pays where cores idle: GPUs)


@dataclass
class Config:
    name: str = "run"
    output_dir: str = ""  # default: runs/<name>
    seed: int = 0
    model: ModelConfig = field(default_factory=ModelConfig)
    env: EnvConfig = field(default_factory=EnvConfig)
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    sft: SFTConfig = field(default_factory=SFTConfig)
    rl: RLConfig = field(default_factory=RLConfig)
    distill: DistillConfig = field(default_factory=DistillConfig)
    hindsight: HindsightConfig = field(default_factory=HindsightConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    log: LogConfig = field(default_factory=LogConfig)
    checkpoint: CheckpointConfig = field(default_factory=CheckpointConfig)

    @property
    def run_dir(self) -> Path:
        return Path(self.output_dir or Path("runs") / self.name)


_POSITIVE = {"sft.grad_accum": 1, "rl.steps": 0, "rl.tasks_per_step": 1, "rl.group_size": 1, "rl.minibatches": 1, "rl.micro_batch_rows": 1, "rl.epochs": 1, "rl.task_pool": 1, "sft.examples": 0, "sft.batch_size": 1,
             "rollout.max_turns": 1, "rollout.max_new_tokens": 1, "rollout.max_episode_tokens": 1,
             "eval.tasks_per_split": 1, "eval.batch_size": 1, "sft.epochs": 1,
             "checkpoint.every": 1, "checkpoint.keep_last": 0, "rl.max_bad_steps": 1, "rollout.max_concurrent": 0, "rollout.greedy_per_group": 0, "rl.warmup_steps": 0, "rl.freeze_layers": 0, "checkpoint.sft_every": 0, "hindsight.max_per_step": 1,
             "eval.every": 0}


def load_config(path: str | Path | None = None, overrides: list[str] = ()) -> Config:
    raw: dict[str, Any] = {}
    if path is not None:
        path = Path(path)
        if not path.exists():
            raise ConfigError(f"recipe file not found: {path}")
        raw = yaml.safe_load(path.read_text()) or {}
        if not isinstance(raw, dict):
            raise ConfigError(f"{path}: a recipe must be a mapping of sections")
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep:
            raise ConfigError(f"--set {item!r}: expected key=value")
        _assign(raw, key.strip().split("."), yaml.safe_load(value))
    cfg = _build(Config, raw, "")
    _check(cfg)
    return cfg


def _assign(raw: dict, keys: list[str], value: Any) -> None:
    for k in keys[:-1]:
        raw = raw.setdefault(k, {})
        if not isinstance(raw, dict):
            raise ConfigError(f"{'.'.join(keys)}: {k} is not a section")
    raw[keys[-1]] = value


def _build(cls, raw: Any, where: str):
    if not isinstance(raw, dict):
        raise ConfigError(f"{where.rstrip('.') or 'recipe'}: expected a section (mapping), got {raw!r}")
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    for key in raw:
        if key not in names:
            close = difflib.get_close_matches(str(key), names, n=1)
            hint = f" (did you mean '{where}{close[0]}'?)" if close else ""
            raise ConfigError(f"unknown key '{where}{key}'{hint}; known: {', '.join(sorted(names))}")
    kwargs = {}
    for name, value in raw.items():
        tp = hints[name]
        key = f"{where}{name}"
        kwargs[name] = _build(tp, value, key + ".") if dataclasses.is_dataclass(tp) else _coerce(tp, value, key)
    return cls(**kwargs)


def _coerce(tp, value: Any, key: str) -> Any:
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        for arm in typing.get_args(tp):
            try:
                return _coerce(arm, value, key)
            except ConfigError:
                continue
        raise ConfigError(f"{key}: {value!r} is not a {tp}")
    if origin is not None:  # list[...] / dict[...]
        if not isinstance(value, origin):
            raise ConfigError(f"{key}: expected a {origin.__name__}, got {value!r}")
        return value
    if tp is type(None):
        if value is None:
            return None
        raise ConfigError(f"{key}: expected null")
    if tp is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if tp is float and isinstance(value, str):
        # YAML 1.1 reads "3e-6" (no dot) as a string; a user writing it means the number
        try:
            return float(value)
        except ValueError:
            pass
    if tp is Any or (isinstance(value, tp) and not (tp is int and isinstance(value, bool))):
        return value
    raise ConfigError(f"{key}: expected {tp.__name__}, got {value!r} ({type(value).__name__})")


def _check(cfg: Config) -> None:
    for key, low in _POSITIVE.items():
        section, name = key.split(".")
        if getattr(getattr(cfg, section), name) < low:
            raise ConfigError(f"{key} must be >= {low}")
    if not 0 < cfg.rollout.top_p <= 1:
        raise ConfigError("rollout.top_p must be in (0, 1]")
    if cfg.rollout.temperature < 0:
        raise ConfigError("rollout.temperature must be >= 0")
    if cfg.rl.steps and cfg.rollout.greedy_per_group >= cfg.rl.group_size:
        raise ConfigError("rollout.greedy_per_group must be below rl.group_size (a group needs a sampled member)")
    if cfg.model.precision not in ("auto", "bf16", "fp32"):
        raise ConfigError("model.precision must be auto, bf16 or fp32")
    if cfg.rl.steps and cfg.rl.group_size < 2:
        raise ConfigError("rl.group_size must be >= 2: group-relative advantages need several samples")
    _check_names(cfg.rl)
    _check_env(cfg.env)
    _check_splits(cfg)
    _check_distill(cfg.distill)
    if cfg.hindsight.teacher not in ("", "demonstration") and _missing_directory(cfg.hindsight.teacher):
        raise ConfigError(f"hindsight.teacher: no such model directory: {cfg.hindsight.teacher}")
    if cfg.hindsight.coef < 0:
        raise ConfigError("hindsight.coef must be >= 0 (0 = off)")
    if cfg.hindsight.restart not in ("failure", "start"):
        raise ConfigError(f"hindsight.restart must be failure or start, not {cfg.hindsight.restart!r}")
    if not 0 <= cfg.sft.heldout < 1:
        raise ConfigError("sft.heldout must be in [0, 1)")
    _check_mix("sft.mix", cfg.sft.mix)
    _check_mix("rl.mix", cfg.rl.mix)
    if cfg.sft.mix and cfg.sft.data:
        raise ConfigError("sft.mix: mixes the env's demonstrations; it does not apply to sft.data")
    if cfg.sft.data and not Path(cfg.sft.data).exists():
        raise ConfigError(f"sft.data: file not found: {cfg.sft.data}")
    if cfg.rl.kl_mode not in ("loss", "reward"):
        raise ConfigError("rl.kl_mode must be loss or reward")
    if not 0 <= cfg.rl.overlong_buffer <= cfg.rollout.max_episode_tokens:
        raise ConfigError("rl.overlong_buffer must be in [0, rollout.max_episode_tokens]")
    if cfg.rl.train_observations and (cfg.rl.epochs > 1 or cfg.rl.minibatches > 1 or cfg.rl.kl_mode == "reward"):
        # observation tokens have no sampler logprob: only the on-policy ratio (current / detached
        # current) and a loss-mode KL are defined on them
        raise ConfigError("rl.train_observations needs rl.epochs: 1, rl.minibatches: 1 and rl.kl_mode: loss")
    if cfg.checkpoint.best_mode not in ("max", "min"):
        raise ConfigError("checkpoint.best_mode must be max or min")
    if cfg.rollout.step_timeout_s < 0:
        raise ConfigError("rollout.step_timeout_s must be >= 0 (0 = no limit)")
    if cfg.rl.kl_coef < 0 or cfg.rl.entropy_coef < 0:
        raise ConfigError("rl.kl_coef and rl.entropy_coef must be >= 0")
    for key in ("rl.lr", "sft.lr"):
        section, name = key.split(".")
        if getattr(getattr(cfg, section), name) <= 0:
            raise ConfigError(f"{key} must be > 0")


LR_SCHEDULES = ("constant", "linear", "cosine")


def _missing_directory(name: str) -> bool:
    """A model name written as a path (not a hub id like org/name) that does not exist."""
    return (name.startswith((".", "/", "~")) or name.count("/") > 1) and not Path(name).expanduser().exists()


def _check_distill(d: DistillConfig) -> None:
    from agentic_rl.algorithms.distill import DISTILL_LOSSES, MERGES

    if d.loss not in DISTILL_LOSSES:
        raise ConfigError(f"distill.loss: unknown distillation loss {d.loss!r}; known: {', '.join(DISTILL_LOSSES.names())}")
    if d.merge not in MERGES:
        raise ConfigError(f"distill.merge: expected one of {', '.join(MERGES)}, got {d.merge!r}")
    if d.weights and len(d.weights) != len(d.teachers):
        raise ConfigError(f"distill.weights: {len(d.weights)} weights for {len(d.teachers)} teachers")
    if any(w < 0 for w in d.weights) or (d.weights and sum(d.weights) <= 0):
        raise ConfigError("distill.weights must be >= 0 with a positive sum")
    bad = [v for v in d.routes.values() if not 0 <= v < len(d.teachers)]
    if bad:
        raise ConfigError(f"distill.routes: teacher index {bad[0]} out of range for {len(d.teachers)} teachers")
    if d.routes and not d.route_key:
        raise ConfigError("distill.routes needs distill.route_key (the task meta field to route on)")
    for name in d.teachers:  # a path that is not there fails now, not after the student has trained
        if _missing_directory(name):
            raise ConfigError(f"distill.teachers: no such model directory: {name}")
    if d.only and not d.teachers:
        raise ConfigError("distill.only needs distill.teachers")
    if d.coef < 0 or d.topk < 1:
        raise ConfigError("distill.coef must be >= 0 and distill.topk >= 1")


def _check_env(env: EnvConfig) -> None:
    """The env exists, reads every option the recipe gives it, and accepts their values (one env is
    built and closed here, so a bad option fails now and not after the model has loaded)."""
    from agentic_rl.envs.base import close_env
    from agentic_rl.envs.registry import get_env

    try:
        spec = get_env(env.name)
    except KeyError as e:
        raise ConfigError(f"env.name: {e.args[0]}") from None
    try:
        spec.check_options(env.options)
        close_env(spec.make_env(env.options))
    except KeyError as e:
        msg = e.args[0] if e.args else str(e)
        raise ConfigError(msg if msg.startswith("env.options") else f"env.options: {msg}") from None
    except (ValueError, TypeError) as e:
        raise ConfigError(f"env.options: env {env.name!r} rejects its options: {e}") from None


def _check_mix(key: str, mix: dict) -> None:
    """`sft.mix` / `rl.mix`: shares are numbers >= 0 that do not all vanish."""
    bad = [k for k, w in mix.items() if isinstance(w, bool) or not isinstance(w, int | float) or w < 0]
    if bad:
        raise ConfigError(f"{key}.{bad[0]}: a share must be a number >= 0, got {mix[bad[0]]!r}")
    if mix and not sum(mix.values()) > 0:
        raise ConfigError(f"{key}: the shares add up to 0")


def _check_splits(cfg: Config) -> None:
    """RL and eval splits exist in the env, and RL never trains on a split that is evaluated."""
    from agentic_rl.envs.registry import get_env

    known = get_env(cfg.env.name).splits
    for key, splits in (("rl.splits", cfg.rl.splits), ("eval.splits", cfg.eval.splits)):
        unknown = [s for s in splits if s not in known]
        if unknown:
            raise ConfigError(f"{key}: env {cfg.env.name!r} has no split {unknown[0]!r}; known: {', '.join(known)}")
    if not cfg.rl.splits:
        raise ConfigError("rl.splits must name at least one split")
    shared = sorted(set(cfg.rl.splits) & set(cfg.eval.splits))
    if shared:
        raise ConfigError(f"rl.splits: {shared[0]!r} is also an eval split; RL would train on the test")


def _check_names(rl: RLConfig) -> None:
    """Algorithm names are checked against their registries now, not at the first RL step."""
    from agentic_rl.algorithms.advantages import ADVANTAGE_ESTIMATORS, SCALES
    from agentic_rl.algorithms.aggregation import AGGREGATIONS
    from agentic_rl.algorithms.losses import KL_ESTIMATORS, POLICY_LOSSES
    from agentic_rl.algorithms.plugins import load_plugins
    from agentic_rl.data.curriculum import SAMPLERS

    load_plugins()

    from agentic_rl.monitor.collapse import REMEDIES
    from agentic_rl.rewards.process import process_reward

    unknown = [a for a in rl.collapse_actions if a not in REMEDIES]
    if unknown:
        raise ConfigError(f"rl.collapse_actions: unknown remediation {unknown[0]!r}; known: {', '.join(REMEDIES.names())}")
    if not 0 < rl.variance_keep <= 1:
        raise ConfigError("rl.variance_keep must be in (0, 1]")
    if rl.process_reward:
        try:
            process_reward(rl.process_reward)
        except KeyError as e:
            raise ConfigError(f"rl.process_reward: {e.args[0]}") from None
    if rl.lr_schedule not in LR_SCHEDULES:
        raise ConfigError(f"rl.lr_schedule: unknown schedule {rl.lr_schedule!r}; known: {', '.join(LR_SCHEDULES)}")
    if rl.task_sampler not in SAMPLERS:
        raise ConfigError(f"rl.task_sampler: unknown task sampler {rl.task_sampler!r}; known: {', '.join(sorted(SAMPLERS))}")
    if rl.critic not in ("none", "value_head", "model"):
        raise ConfigError(f"rl.critic: expected none, value_head or model, got {rl.critic!r}")
    if rl.critic_model and rl.critic != "model":
        raise ConfigError("rl.critic_model is only used with rl.critic: model")
    if rl.advantage == "gae" and rl.critic == "none":
        raise ConfigError("rl.advantage: gae needs a critic: set rl.critic: value_head or model")
    if rl.advantage != "gae" and rl.critic != "none":
        raise ConfigError(f"rl.critic: a critic is only used by rl.advantage: gae (got {rl.advantage!r})")
    if not (0 <= rl.gamma <= 1 and 0 <= rl.lam <= 1):
        raise ConfigError("rl.gamma and rl.lam must be in [0, 1]")
    for key, registry in (("advantage", ADVANTAGE_ESTIMATORS), ("advantage_scale", SCALES),
                          ("policy_loss", POLICY_LOSSES), ("aggregation", AGGREGATIONS),
                          ("kl_estimator", KL_ESTIMATORS)):
        if getattr(rl, key) not in registry:
            raise ConfigError(f"rl.{key}: unknown {registry.kind} {getattr(rl, key)!r}; "
                              f"known: {', '.join(registry.names())}")


def to_dict(cfg: Config) -> dict[str, Any]:
    return dataclasses.asdict(cfg)
