"""`check_config`: what a recipe names must exist — each variant in its registry, the env, its options
and splits, the model directories it points at. `train()` runs it before loading a model, so a typo
fails in a second with one message naming the key, not an hour into a run.

Every variant chosen by name is looked up in the registry that holds it; the registries' names are
the valid values (third-party entries from installed packages are loaded here, explicitly).
"""

from __future__ import annotations

import warnings
from pathlib import Path

from agentic_rl.algorithms.advantages import ADVANTAGE_ESTIMATORS, SCALES
from agentic_rl.algorithms.aggregation import AGGREGATIONS
from agentic_rl.algorithms.correction import ROLLOUT_CORRECTIONS
from agentic_rl.algorithms.distill import DISTILL_LOSSES, MERGES
from agentic_rl.algorithms.kl import KL_ESTIMATORS, KL_LOSSES, KL_MODES
from agentic_rl.algorithms.losses import POLICY_LOSSES
from agentic_rl.algorithms.plugins import load_plugins
from agentic_rl.data.curriculum import SAMPLERS
from agentic_rl.envs.base import close_env
from agentic_rl.envs.registry import get_env, resolve_env
from agentic_rl.errors import UserDataError, UserFileError
from agentic_rl.models.precision import PRECISIONS
from agentic_rl.registry import Registry
from agentic_rl.rewards.compose import check_reward
from agentic_rl.rewards.process import process_reward
from agentic_rl.rollout.context import STRATEGIES
from agentic_rl.rollout.hindsight import DEMONSTRATION_TEACHER, RESTARTS
from agentic_rl.trainer.config import Config, ConfigError, DistillConfig, EnvConfig, get_value
from agentic_rl.trainer.critic import CRITICS
from agentic_rl.trainer.loss_terms import policy_settings
from agentic_rl.trainer.privileged import PRIVILEGED
from agentic_rl.trainer.remedies import REMEDIES
from agentic_rl.trainer.schedule import LR_SCHEDULES
from agentic_rl.trainer.state import BEST_MODES

# recipe key -> the registry its value must name
NAMED: dict[str, Registry] = {
    "model.precision": PRECISIONS,
    "rl.tasks.sampler": SAMPLERS,
    "rl.optim.schedule": LR_SCHEDULES,
    "rl.algorithm.advantage": ADVANTAGE_ESTIMATORS,
    "rl.algorithm.advantage_scale": SCALES,
    "rl.algorithm.policy_loss": POLICY_LOSSES,
    "rl.algorithm.aggregation": AGGREGATIONS,
    "rl.algorithm.kl_estimator": KL_ESTIMATORS,
    "rl.algorithm.kl_mode": KL_MODES,
    "rl.rollout_correction.mode": ROLLOUT_CORRECTIONS,
    "rl.critic.kind": CRITICS,
    "distill.loss": DISTILL_LOSSES,
    "distill.merge": MERGES,
    "hindsight.restart": RESTARTS,
    "checkpoint.best_mode": BEST_MODES,
}


def check_config(cfg: Config) -> None:
    """Raises ConfigError naming the first key whose value does not exist."""
    load_plugins()
    for key, registry in NAMED.items():
        value = get_value(cfg, key)
        if value is not None and value not in registry:  # null: a default the registry resolves
            raise ConfigError(f"{key}: unknown {registry.kind} {value!r}; known: {', '.join(registry.names())}")
    _check_lists(cfg)
    _check_critic(cfg)
    _check_kl(cfg)
    _check_policy_loss(cfg)
    _check_env(cfg.env)
    _check_splits(cfg)
    _check_distill(cfg.distill)
    _check_rollout(cfg)
    _check_staleness(cfg)
    _check_parallel(cfg)
    _check_agent(cfg)
    _check_backend(cfg)
    teacher = cfg.hindsight.teacher
    if teacher not in ("", DEMONSTRATION_TEACHER) and _missing_directory(teacher):
        raise ConfigError(f"hindsight.teacher: no such model directory: {teacher}")
    if cfg.sft.data and not Path(cfg.sft.data).exists():
        raise ConfigError(f"sft.data: file not found: {cfg.sft.data}")


def _check_lists(cfg: Config) -> None:
    unknown = [a for a in cfg.rl.collapse.actions if a not in REMEDIES]
    if unknown:
        raise ConfigError(f"rl.collapse.actions: unknown {REMEDIES.kind} {unknown[0]!r}; "
                          f"known: {', '.join(REMEDIES.names())}")
    judged = bool(cfg.reward.judge.model or cfg.reward.judge.url)
    if cfg.rl.algorithm.process_reward:
        try:
            process_reward(cfg.rl.algorithm.process_reward, judge=object() if judged else None)
        except KeyError as e:
            raise ConfigError(f"rl.algorithm.process_reward: {e.args[0]}") from None
    try:
        check_reward(cfg.reward.components, cfg.reward.penalties)
    except ValueError as e:
        raise ConfigError(f"reward.{e.args[0]}") from None
    if any(c.name == "judge" for c in cfg.reward.components) and not judged:
        raise ConfigError("reward.components: judge needs reward.judge.model (policy, a model name or directory) "
                          "or reward.judge.url")
    if cfg.reward.judge.model not in ("", "policy") and not cfg.reward.judge.url and _missing_directory(cfg.reward.judge.model):
        raise ConfigError(f"reward.judge.model: no such model directory: {cfg.reward.judge.model}")


def _check_critic(cfg: Config) -> None:
    advantage, kind = cfg.rl.algorithm.advantage, cfg.rl.critic.kind
    if advantage == "gae" and kind == "none":
        raise ConfigError("rl.algorithm.advantage: gae needs a critic: set rl.critic.kind: value_head or model")
    if advantage != "gae" and kind != "none":
        raise ConfigError(f"rl.critic.kind: a critic is only used by rl.algorithm.advantage: gae (got {advantage!r})")


def _check_policy_loss(cfg: Config) -> None:
    alg = cfg.rl.algorithm
    if alg.dual_clip and (alg.dual_clip <= 1 or alg.policy_loss != "ppo_clip"):
        raise ConfigError("rl.algorithm.dual_clip must be > 1 (0 = off), with rl.algorithm.policy_loss: ppo_clip")
    settings = policy_settings(alg)
    if settings.clip_low < 0 or settings.clip_high < 0:
        raise ConfigError("rl.algorithm.clip_low and clip_high must be >= 0")


def _check_kl(cfg: Config) -> None:
    alg = cfg.rl.algorithm
    if alg.kl_coef > 0 and KL_MODES.get(alg.kl_mode).in_loss and alg.kl_estimator not in KL_LOSSES:
        raise ConfigError(
            f"rl.algorithm.kl_estimator: {alg.kl_estimator!r} cannot be a KL loss term: on the policy's own "
            f"samples its gradient does not descend KL(policy || reference) (k1's is zero in expectation); "
            f"use one of {', '.join(KL_LOSSES.names())}, or rl.algorithm.kl_mode: reward, where k1 is the "
            "classic penalty")


def _missing_directory(name: str) -> bool:
    """A model name written as a path (not a hub id like org/name) that does not exist."""
    return (name.startswith((".", "/", "~")) or name.count("/") > 1) and not Path(name).expanduser().exists()


def _check_distill(d: DistillConfig) -> None:
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
    if d.privileged and d.privileged not in PRIVILEGED:
        raise ConfigError(f"distill.privileged: unknown {PRIVILEGED.kind} {d.privileged!r}; "
                          f"known: {', '.join(PRIVILEGED.names())} (or empty: off)")
    if d.privileged and (len(d.teachers) > 1 or d.routes):
        raise ConfigError("distill.privileged: the example is shown to one teacher, the policy itself or the one "
                          "frozen model in distill.teachers (no routes)")
    if d.only and not (d.teachers or d.privileged):
        raise ConfigError("distill.only needs distill.teachers or distill.privileged")


def _check_agent(cfg: Config) -> None:
    """An agent program is a callable the recipe names: loadable here (and so on every Ray worker
    that shares this code)."""
    if not cfg.rollout.agent.program:
        return
    from agentic_rl.registry import load_callable

    try:
        load_callable(cfg.rollout.agent.program)
    except (ValueError, ImportError) as e:
        raise ConfigError(str(e)) from None


def _check_backend(cfg: Config) -> None:
    """A backend of the user's own replaces the built-in ones, so it names none of them."""
    ro = cfg.rollout
    if not ro.backend:
        return
    from agentic_rl.registry import load_callable

    for key, set_ in (("rollout.agent.program", bool(ro.agent.program)), ("rollout.workers.count", ro.workers.count > 0)):
        if set_:
            raise ConfigError(f"{key}: not with rollout.backend (a backend of your own samples every episode)")
    try:
        load_callable(ro.backend, "rollout.backend")
    except (ValueError, ImportError) as e:
        raise ConfigError(str(e)) from None


def _check_parallel(cfg: Config) -> None:
    """FSDP shards the policy: what reads or writes it outside the training forward is built for the
    full fine-tune without a critic."""
    if cfg.model.parallel != "fsdp":
        return
    for key, blocked in (("model.lora_rank", cfg.model.lora_rank > 0), ("rl.critic.kind", cfg.rl.critic.kind != "none"),
                         ("rl.collapse.actions", "rollback" in cfg.rl.collapse.actions),
                         ("distill.privileged", bool(cfg.distill.privileged)),
                         ("rollout.engine.name", cfg.rollout.engine.name != "embedded")):
        if blocked:
            raise ConfigError(f"{key}: not with model.parallel: fsdp (a LoRA policy, a critic, rollback's weight "
                              "snapshot, the privileged self-teacher and a served engine's weight writer are built "
                              "for a whole copy on every rank: use model.parallel: ddp)")


def _check_rollout(cfg: Config) -> None:
    ro = cfg.rollout
    c = ro.context
    if c.strategy not in STRATEGIES:
        raise ConfigError(f"rollout.context.strategy: unknown {c.strategy!r}; known: {', '.join(STRATEGIES)}")
    if c.strategy != "none" and c.budget_tokens <= ro.max_new_tokens:
        raise ConfigError(f"rollout.context.budget_tokens must exceed rollout.max_new_tokens ({ro.max_new_tokens}): "
                          "a context holds its prompt and the next action")
    if not ro.workers.count:
        return
    if ro.engine.name != "embedded":
        raise ConfigError(f"rollout.workers.count: Ray workers run embedded engines (rollout.engine.name {ro.engine.name!r}); "
                          "a served engine already serves many clients")
    if cfg.model.lora_rank:
        raise ConfigError("rollout.workers.count: LoRA policies are not sent to Ray workers yet (model.lora_rank)")
    try:
        import ray  # noqa: F401
    except ImportError:
        raise ConfigError("rollout.workers.count needs Ray: pip install 'agentic-rl[ray]'") from None


# geo_mask's band below this at k > 0 warns: the main job's per-token sampler-trainer gap measured
# 0.0064 nats at k = 0 (bf16), 0.014 at k = 1 and 0.022 at k = 2 (benchmarks/results/async_2026-11-28/)
GEO_BAND_STALE = 0.05


def _check_staleness(cfg: Config) -> None:
    """Batches produced ahead are sampled by weights up to k versions older than those they train;
    the rollout correction is what reweights them. Without it the run trains, but a warning says so."""
    rl = cfg.rl
    if rl.max_staleness > 0 and rl.rollout_correction.mode == "none":
        warnings.warn(f"rl.max_staleness: {rl.max_staleness} with rl.rollout_correction.mode: none: batches up to "
                      f"{rl.max_staleness} versions stale train as if the weights they update had sampled them; "
                      "use rl.rollout_correction.mode: tis (the default) or mis", UserWarning, stacklevel=3)
    c = rl.rollout_correction
    if rl.max_staleness > 0 and c.mode == "geo_mask" and c.geo_band < GEO_BAND_STALE:
        warnings.warn(f"rl.rollout_correction.geo_band: {c.geo_band:g} with rl.max_staleness: {rl.max_staleness}: "
                      f"geo_mask drops a sequence whose mean log-weight leaves +-{c.geo_band:g}, and a batch one "
                      "version stale is off by 0.014 nats a token on the main job (0.022 at two versions): most "
                      f"stale sequences would leave the loss; raise geo_band to {GEO_BAND_STALE:g} or more, or use "
                      "mode: tis", UserWarning, stacklevel=3)


def _check_env(env: EnvConfig) -> None:
    """The env exists, reads every option the recipe gives it, and accepts their values (one env is
    built and closed here, so a bad option fails now and not after the model has loaded)."""
    try:
        spec = get_env(env.name)
    except KeyError as e:
        raise ConfigError(f"env.name: {e.args[0]}") from None
    try:
        spec.check_options(env.options)
        spec = resolve_env(env.name, env.options)  # the tasks env reads its files here
        close_env(spec.make_env(env.options))
    except (UserDataError, UserFileError):  # a file's own message: its path and line
        raise
    except KeyError as e:
        msg = e.args[0] if e.args else str(e)
        raise ConfigError(msg if msg.startswith("env.options") else f"env.options: {msg}") from None
    except (ValueError, TypeError) as e:
        raise ConfigError(f"env.options: env {env.name!r} rejects its options: {e}") from None


def _check_splits(cfg: Config) -> None:
    """RL, SFT and eval splits exist in the env, and training never draws from a split that is
    evaluated or held out (named `heldout...`), whether or not this recipe evaluates it."""
    known = resolve_env(cfg.env.name, cfg.env.options).splits  # a bound spec's own (search_r1: synth)
    trained = (("rl.tasks.splits", cfg.rl.tasks.splits), ("sft.split", [cfg.sft.split] if cfg.sft.examples else []))
    for key, splits in (*trained, ("eval.splits", cfg.eval.splits)):
        unknown = [s for s in splits if s not in known]
        if unknown:
            raise ConfigError(f"{key}: env {cfg.env.name!r} has no split {unknown[0]!r}; known: {', '.join(known)}")
    if not cfg.rl.tasks.splits:
        raise ConfigError("rl.tasks.splits must name at least one split")
    for key, splits in trained:
        tested = sorted(s for s in splits if s in cfg.eval.splits or s.startswith("heldout"))
        if tested:
            raise ConfigError(f"{key}: {tested[0]!r} is a held-out or eval split; training would see the test")
