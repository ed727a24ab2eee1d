"""The typed recipe: frozen sections of flat dataclasses, each default defined once.

A recipe YAML holds the same sections; `--set section.key=value` (or `rl.optim.lr=...` one level
deeper) overrides one field. `load_config` parses and checks types and ranges: unknown keys, wrong
types and out-of-range values fail with one message naming the key. Names that must exist somewhere
else — an algorithm in its registry, the env and its options, its splits — are checked by
`trainer/checks.py::check_config`, which `train()` runs before it loads a model.

A config never changes once built. What changes during a run (a collapse remedy raising the entropy
bonus) is a new config made by `with_values`, and the run logs it as an event.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml

from agentic_rl.errors import ConfigError
from agentic_rl.trainer.coerce import assign, build
from agentic_rl.trainer.reward_config import RewardConfig
from agentic_rl.trainer.rollout_config import RolloutConfig


@dataclass(frozen=True)
class ModelConfig:
    name: str = "smollm2"  # "smollm2" (packaged), "tiny", a local HF directory or a hub id
    device: str = "auto"  # auto | cpu | cuda | cuda:N (any torch device): auto = the first CUDA device when present
    precision: str = "auto"  # auto | bf16 | fp32: auto = bf16 on CUDA, and on a CPU where a product measures it faster (once per machine)
    lora_rank: int = 0  # 0 = full fine-tune
    lora_alpha: int = 32
    threads: int = 0  # torch threads; 0 = auto: the cores other processes leave idle at the start (models/threads.py)
    memory_check: bool = True  # stop before RL when its estimated memory exceeds what is available
    # before RL, when the estimate exceeds what is available: gradient checkpointing on, then a token
    # bound on micro-batches, then fewer episodes decoding at once, until it fits (`models/memory.py`'s
    # plan_memory; the memory_estimate event's mem_plan names what changed). Off with memory_check: a
    # run that must not depend on what else the machine runs is not re-planned by it either
    memory_plan: bool = True
    release_memory: bool = True  # after each RL step, malloc's free pages go back to the system (malloc_trim)
    # under torchrun: ddp (a whole copy on every rank, gradients all-reduced) | fsdp (FSDP2: parameters,
    # gradients and optimizer state sharded over the ranks; full fine-tune, no critic, no rollback)
    parallel: Literal["ddp", "fsdp"] = "ddp"
    gradient_checkpointing: bool = False  # recompute layer activations in the backward: less memory, one more forward of compute
    # positions past the model's context: a static RoPE scaling, {rope_type: yarn | linear, factor: F}, the
    # context F times longer (`models/loader.py`); {} = the model's own
    rope_scaling: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class EnvConfig:
    name: str = "calculator"
    options: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class CPTConfig:
    """Agentic continual pre-training (docs/synth.md): next-token loss on a text corpus, before SFT."""

    corpus: str = ""  # a JSONL with a "text" on every line (`agentic-rl synth fas|has` writes one); "" = off
    lr: float = 2e-5
    epochs: int = 1
    batch_size: int = 8  # rows per micro-batch
    grad_accum: int = 1
    pack: int = 1024  # texts packed whole into rows of at most this many tokens (0: one text a row)
    max_tokens: int = 1024  # a longer text is cut to this many tokens
    seed: int = 1


@dataclass(frozen=True)
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
    split: str = "train"  # the env split the demonstrated tasks come from (never a held-out or eval one)
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


@dataclass(frozen=True)
class TaskConfig:
    """rl.tasks: which prompts a step samples, and how many episodes each."""

    per_step: int = 4
    group_size: int = 8  # episodes per task: the group the advantages are relative to
    sampler: str = "uniform"  # uniform | pass_rate | failure_rate (curricula on the pass rate of each task kind)
    pool: int = 4  # the sampler draws from pool x steps x per_step training tasks
    # env splits the RL prompts come from, in equal shares; RL needs no demonstration, so a prompt-only
    # split (the calculator's rl_extra) can widen it beyond what SFT saw. Never an eval split.
    splits: list[str] = field(default_factory=lambda: ["train"])
    # shares of the prompts by a task meta field, as sft.mix (e.g. {bare: 1, one_step: 1, two_step: 3}
    # with mix_key "family"), taken from the splits' stream; empty = the splits' own mix
    mix: dict[str, float] = field(default_factory=dict)
    mix_key: str = "family"


@dataclass(frozen=True)
class OptimConfig:
    """rl.optim: the optimizer, its schedule, and how a rollout batch is cut into optimizer steps."""

    lr: float = 1e-6
    schedule: str = "constant"  # constant | linear | cosine: decay over the RL steps after the warmup
    warmup_steps: int = 0  # RL steps of linear warmup from lr / warmup_steps to lr
    max_grad_norm: float = 1.0
    minibatches: int = 1  # optimizer steps per rollout batch (PPO minibatches)
    epochs: int = 1  # passes over each rollout batch (PPO epochs)
    micro_batch_rows: int = 8  # groups smaller than this share a forward pass, up to this many rows
    pack: bool = True  # forward each micro-batch padding-free, its rows back to back (`trainer/batching.py`); false: right-padded
    # no micro-batch holds more tokens than this: a larger group is cut into parts of its rows (each
    # forwarding the prompt); packed, whole groups fill a micro-batch up to it. 0 = packed: the tokens
    # the memory estimate holds for its largest micro-batch (`models/memory.py`), padded: no bound
    micro_batch_tokens: int = 0


@dataclass(frozen=True)
class AlgorithmConfig:
    """rl.algorithm: rewards -> advantages -> the per-token loss (docs/algorithms/)."""

    advantage: str = "grpo"  # grpo | dr_grpo | rloo | reinforce_pp | reinforce_pp_baseline | gae
    advantage_scale: str = "group"  # grpo only: divide by the std of the group, the batch, or none
    policy_loss: str = "ppo_clip"  # ppo_clip | gspo | cispo
    # null: the papers' settings (the advantage estimator's aggregation for dr_grpo, else the policy
    # loss's: ppo_clip 0.2 / 0.2 token-mean, gspo 3e-4 / 4e-4 seq-mean-token-mean, cispo 0 / 4 token-mean)
    aggregation: str | None = None  # token-mean | seq-mean-token-mean | seq-mean-token-sum-norm
    clip_low: float | None = None
    clip_high: float | None = None
    dual_clip: float = 0.0  # > 1: dual-clip PPO's c, a cap on a negative advantage's loss (ppo_clip); 0 = off
    kl_coef: float = 0.0
    kl_estimator: str = "k3"  # k1 | k2 | k3; a loss term takes k2 or k3 (valued k3, with k2's gradient)
    kl_mode: str = "loss"  # loss: a KL term in the loss | reward: a per-token KL penalty in the reward
    entropy_coef: float = 0.0  # > 0 adds an entropy bonus -coef * H to the loss
    gamma: float = 1.0  # discount per sampled token (gae, reinforce_pp, per-turn rewards)
    lam: float = 1.0  # GAE lambda
    overlong_buffer: int = 0  # > 0: DAPO's soft overlong penalty over the last N tokens of the episode budget
    overlong_factor: float = 1.0
    mask_truncated: bool = False  # DAPO's overlong filtering: truncated episodes leave the loss
    process_reward: str = ""  # PROCESS_REWARDS names joined by "+" (e.g. step_signals+operands); "" = outcome only


@dataclass(frozen=True)
class CorrectionConfig:
    """rl.rollout_correction: the sampler's logprobs against the trainer's (algorithms/correction.py)."""

    mode: str = "tis"  # tis | mis | geo_mask | none
    threshold: float = 2.0  # C: tis truncates the weight pi_trainer / pi_sampler at C; mis drops it outside [1/C, C]
    geo_band: float = 0.001  # geo_mask: drop a sequence whose geometric-mean weight leaves [1/(1+b), 1+b]


@dataclass(frozen=True)
class FilterConfig:
    """rl.filters: which sampled groups train."""

    dynamic_sampling: bool = False  # DAPO: replace groups without reward spread by fresh rollouts
    max_refill_rounds: int = 2
    variance_keep: float = 1.0  # StarPO-S: train on this fraction of groups, those with the most reward spread


@dataclass(frozen=True)
class CriticConfig:
    """rl.critic.kind: PPO's value function (rl.algorithm.advantage: gae needs one)."""

    kind: str = "none"  # none | value_head (a head on the policy) | model (its own transformer)
    model: str = ""  # kind model only; "" = a copy of the policy as RL starts
    lr: float = 1e-4
    vf_coef: float = 0.5  # weight of the value loss
    value_clip: float = 0.2


@dataclass(frozen=True)
class CollapseConfig:
    """rl.collapse: the echo-trap monitor (docs/monitor.md)."""

    window: int = 3  # steps per rolling window
    actions: list[str] = field(default_factory=list)  # remediations on a warning (empty: warn only)


@dataclass(frozen=True)
class PartialRolloutConfig:
    """rl.partial_rollout: episodes in flight go on across a weight sync (rollout/partial.py, docs/async.md)."""

    turns_per_version: int = 0  # > 0: each step's round takes an episode at most this many turns; 0 = off
    max_versions: int = 2  # the most weight versions (rounds) one episode may span; past it, truncated


@dataclass(frozen=True)
class RLConfig:
    steps: int = 0  # 0 skips RL
    seed: int = 2
    max_bad_steps: int = 3  # consecutive steps with a non-finite loss or gradient (each skipped) before the run stops
    infra_warn_frac: float = 0.1  # warn when more of a step's episodes fail on the machine's side (all: the run stops)
    # rollouts produced while the update runs (trainer/producer.py): a batch trains on weights at
    # most this many versions newer than those that sampled it; 0 = the synchronous loop, exactly
    max_staleness: int = 0
    partial_rollout: PartialRolloutConfig = field(default_factory=PartialRolloutConfig)
    tasks: TaskConfig = field(default_factory=TaskConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    algorithm: AlgorithmConfig = field(default_factory=AlgorithmConfig)
    rollout_correction: CorrectionConfig = field(default_factory=CorrectionConfig)
    filters: FilterConfig = field(default_factory=FilterConfig)
    critic: CriticConfig = field(default_factory=CriticConfig)
    collapse: CollapseConfig = field(default_factory=CollapseConfig)


@dataclass(frozen=True)
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
    # the policy itself (or the one model in `teachers`, frozen), shown a worked example, as the teacher
    # (trainer/privileged.py): "" = off; solution (the task's own demonstration) | similar (another task
    # of its kind, by `privileged_key`)
    privileged: str = ""
    privileged_key: str = "template"


@dataclass(frozen=True)
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


@dataclass(frozen=True)
class EvalConfig:
    tasks_per_split: int = 200
    splits: list[str] = field(default_factory=lambda: ["heldout_in", "heldout_out"])
    baselines: bool = True  # also evaluate the untrained model zero-shot and few-shot
    batch_size: int = 64  # episodes decoded together; the splits share batches
    seed: int = 12345
    every: int = 0  # also evaluate every N RL steps (a learning curve in metrics.jsonl); 0 = at the end only
    samples: int = 1  # episodes per task: 1 = greedy; k > 1 = sampled at rollout.temperature, with pass@k


@dataclass(frozen=True)
class LogConfig:
    tensorboard: bool = True
    mlflow: str = ""  # a tracking URI (http://...) or a local directory (MLflow file store); "" = off
    wandb: str = ""  # a W&B project name; "" = off (WANDB_MODE=offline keeps it local)
    trajectories_per_step: int = 8  # written to trajectories/*.jsonl
    memory_census: bool = False  # each RL step also counts live tensors and gc objects (mem_tensors ...): 1-2 s
    progress: bool = True


@dataclass(frozen=True)
class CheckpointConfig:
    """Resumable state checkpoints (`trainer/state.py`), besides the model checkpoints of each stage."""

    every: int = 1  # RL steps between state checkpoints (and one after baselines, SFT and the last step)
    sft_every: int = 0  # SFT steps between state checkpoints; 0 = only when SFT ends
    keep_last: int = 2  # newest states kept; 0 keeps all
    best_metric: str = ""  # also keep the state with the best value of this RL metric (e.g. reward_mean)
    best_mode: str = "max"  # max | min
    async_save: bool = False  # write states in a background thread from a host copy (pays where cores idle: GPUs)


@dataclass(frozen=True)
class Config:
    name: str = "run"
    output_dir: str = ""  # default: runs/<name>
    seed: int = 0
    model: ModelConfig = field(default_factory=ModelConfig)
    env: EnvConfig = field(default_factory=EnvConfig)
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    cpt: CPTConfig = field(default_factory=CPTConfig)
    sft: SFTConfig = field(default_factory=SFTConfig)
    rl: RLConfig = field(default_factory=RLConfig)
    distill: DistillConfig = field(default_factory=DistillConfig)
    hindsight: HindsightConfig = field(default_factory=HindsightConfig)
    reward: RewardConfig = field(default_factory=RewardConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    log: LogConfig = field(default_factory=LogConfig)
    checkpoint: CheckpointConfig = field(default_factory=CheckpointConfig)

    @property
    def run_dir(self) -> Path:
        return Path(self.output_dir or Path("runs") / self.name)


# the smallest value of each bounded integer field
_AT_LEAST = {
    "sft.examples": 0, "sft.batch_size": 1, "sft.grad_accum": 1, "sft.epochs": 1,
    "cpt.epochs": 1, "cpt.batch_size": 1, "cpt.grad_accum": 1, "cpt.pack": 0, "cpt.max_tokens": 2,
    "rollout.max_turns": 1, "rollout.max_new_tokens": 1, "rollout.max_episode_tokens": 1, "rollout.max_concurrent": 0,
    "rollout.workers.count": 0, "rollout.agent.concurrency": 0,
    "rl.steps": 0, "rl.max_bad_steps": 1, "rl.max_staleness": 0, "rl.partial_rollout.turns_per_version": 0, "rl.partial_rollout.max_versions": 2,
    "rl.tasks.per_step": 1, "rl.tasks.group_size": 1, "rl.tasks.pool": 1,
    "rl.optim.minibatches": 1, "rl.optim.epochs": 1, "rl.optim.micro_batch_rows": 1, "rl.optim.warmup_steps": 0,
    "rl.filters.max_refill_rounds": 0, "rl.collapse.window": 1, "hindsight.max_per_step": 1,
    "eval.tasks_per_split": 1, "eval.batch_size": 1, "eval.every": 0,
    "checkpoint.every": 1, "checkpoint.sft_every": 0, "checkpoint.keep_last": 0,
}


# keys a recipe of an earlier layout may hold -> where they are now (`rollout` split by concern)
MOVED = {
    "rollout.engine": "rollout.engine.name", "rollout.engine_timeout_s": "rollout.engine.timeout_s",
    "rollout.weight_update": "rollout.engine.weight_update", "rollout.vllm_python": "rollout.engine.vllm_python",
    "rollout.vllm_args": "rollout.engine.vllm_args", "rollout.sync_probe_tol": "rollout.engine.sync_probe_tol",
    "rollout.workers": "rollout.workers.count", "rollout.worker_cpus": "rollout.workers.cpus",
    "rollout.worker_gpus": "rollout.workers.gpus", "rollout.agent": "rollout.agent.program",
    "rollout.agent_history": "rollout.agent.history", "rollout.agent_timeout_s": "rollout.agent.timeout_s",
    "rollout.agent_concurrency": "rollout.agent.concurrency",
}


def load_config(path: str | Path | None = None, overrides: list[str] = ()) -> Config:
    """A recipe file (or the defaults) with `key=value` overrides applied, parsed and range-checked."""
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
        assign(raw, key.strip().split("."), yaml.safe_load(value))
    _check_moved(raw)
    cfg = build(Config, raw, "")
    _check_ranges(cfg)
    return cfg


def _check_moved(raw: dict) -> None:
    """A key of `MOVED` names where it is now. A key that became a section (`rollout.engine`) moved
    only when it holds a value, not a mapping."""
    for old, new in MOVED.items():
        *parents, last = old.split(".")
        section = raw
        for k in parents:
            section = section.get(k) if isinstance(section, dict) else None
        if isinstance(section, dict) and last in section and not isinstance(section[last], dict):
            raise ConfigError(f"{old} moved to {new}")


def with_values(cfg: Config, values: dict[str, Any]) -> Config:
    """A copy of `cfg` with dotted keys replaced (`{"rl.filters.variance_keep": 0.25}`)."""
    for key, value in values.items():
        cfg = _replace(cfg, key.split("."), value)
    return cfg


def _replace(section, keys: list[str], value):
    if len(keys) == 1:
        return dataclasses.replace(section, **{keys[0]: value})
    return dataclasses.replace(section, **{keys[0]: _replace(getattr(section, keys[0]), keys[1:], value)})


def get_value(cfg: Config, key: str) -> Any:
    for k in key.split("."):
        cfg = getattr(cfg, k)
    return cfg


def to_dict(cfg: Config) -> dict[str, Any]:
    return dataclasses.asdict(cfg)


def _check_ranges(cfg: Config) -> None:
    """Values that are wrong whatever the env and the registries hold."""
    for key, low in _AT_LEAST.items():
        if get_value(cfg, key) < low:
            raise ConfigError(f"{key} must be >= {low}")
    rl, ro, alg = cfg.rl, cfg.rollout, cfg.rl.algorithm
    rules = [
        (0 < ro.top_p <= 1, "rollout.top_p must be in (0, 1]"),
        (ro.temperature >= 0, "rollout.temperature must be >= 0"),
        (ro.step_timeout_s >= 0, "rollout.step_timeout_s must be >= 0 (0 = no limit)"),
        (ro.agent.timeout_s >= 0, "rollout.agent.timeout_s must be >= 0 (0 = no limit)"),
        (not rl.steps or ro.temperature > 0,
         "rollout.temperature: 0 is greedy decoding, and RL trains on samples of a distribution (the "
         "trainer divides the logits by the temperature); use a temperature > 0, e.g. 0.7. Held-out "
         "evaluation decodes greedily already"),
        (not rl.steps or ro.top_p == 1,
         "rollout.top_p < 1 samples from a truncated distribution, but the sampler's stored logprobs and "
         "the trainer's are of the whole one, so every importance ratio would be wrong; RL needs "
         "rollout.top_p: 1"),
        (not rl.steps or rl.tasks.group_size >= 2,
         "rl.tasks.group_size must be >= 2: group-relative advantages need several samples"),
        (0 < rl.filters.variance_keep <= 1, "rl.filters.variance_keep must be in (0, 1]"),
        (rl.rollout_correction.threshold > 1 and rl.rollout_correction.geo_band > 0,
         "rl.rollout_correction.threshold must be > 1 and geo_band > 0"),
        (0 <= alg.gamma <= 1 and 0 <= alg.lam <= 1, "rl.algorithm.gamma and rl.algorithm.lam must be in [0, 1]"),
        (0 <= alg.overlong_buffer <= ro.max_episode_tokens,
         "rl.algorithm.overlong_buffer must be in [0, rollout.max_episode_tokens]"),
        (alg.kl_coef >= 0 and alg.entropy_coef >= 0, "rl.algorithm.kl_coef and rl.algorithm.entropy_coef must be >= 0"),
        (rl.optim.lr > 0, "rl.optim.lr must be > 0"),
        (cfg.sft.lr > 0, "sft.lr must be > 0"),
        (cfg.cpt.lr > 0, "cpt.lr must be > 0"),
        (0 <= cfg.sft.heldout < 1, "sft.heldout must be in [0, 1)"),
        (not (cfg.sft.mix and cfg.sft.data), "sft.mix: mixes the env's demonstrations; it does not apply to sft.data"),
        (not rl.critic.model or rl.critic.kind == "model", "rl.critic.model is only used with rl.critic.kind: model"),
        (cfg.hindsight.coef >= 0, "hindsight.coef must be >= 0 (0 = off)"),
        (cfg.distill.coef >= 0 and cfg.distill.topk >= 1, "distill.coef must be >= 0 and distill.topk >= 1"),
        (ro.engine.weight_update != "vllm_lora" or cfg.model.lora_rank > 0,
         "rollout.engine.weight_update: vllm_lora sends LoRA adapters, and model.lora_rank is 0"),
    ]
    for ok, message in [*rules, *_partial_rules(cfg)]:
        if not ok:
            raise ConfigError(message)
    _check_mix("sft.mix", cfg.sft.mix)
    _check_mix("rl.tasks.mix", rl.tasks.mix)


def _partial_rules(cfg: Config) -> list[tuple[bool, str]]:
    """rl.partial_rollout is for the in-process sampler of a run producing ahead (rollout/partial.py)."""
    rl, ro = cfg.rl, cfg.rollout
    if not rl.partial_rollout.turns_per_version:
        return []
    return [
        (rl.max_staleness > 0, "rl.partial_rollout: episodes go on under newer weights only when batches may be "
                               "stale; at rl.max_staleness: 0 (the synchronous, on-policy loop) set it >= 1"),
        (not rl.filters.dynamic_sampling, "rl.partial_rollout does not combine with rl.filters.dynamic_sampling "
                                          "(a refill round would carry episodes of its own)"),
        (not (ro.workers.count or ro.agent.program or ro.backend),
         "rl.partial_rollout: only the in-process sampler pauses and continues episodes (not rollout.workers, "
         "rollout.agent or a rollout.backend of one's own)"),
    ]


def _check_mix(key: str, mix: dict) -> None:
    """`sft.mix` / `rl.tasks.mix`: shares are numbers >= 0 that do not all vanish."""
    bad = [k for k, w in mix.items() if isinstance(w, bool) or not isinstance(w, int | float) or w < 0]
    if bad:
        raise ConfigError(f"{key}.{bad[0]}: a share must be a number >= 0, got {mix[bad[0]]!r}")
    if mix and not sum(mix.values()) > 0:
        raise ConfigError(f"{key}: the shares add up to 0")
