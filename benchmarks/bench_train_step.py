"""Seconds of one GRPO update on a real recipe step, five ways side by side in one run:

  flat-kept     groups of equal rewards trained: their advantages centred without the exact-zero
                rule, so eight rewards of 0.1 average to 0.1 + 7e-9 in float32, get advantages of
                0.0074 instead of 0, and pass the zero-spread filter (the cost of that rule)
  per-group     only groups with reward spread trained; each micro-batch forwards its whole prompt
                (system prompt, tools, task)
  shared        also the system prompt forwarded once for all micro-batches (SharedPrompt)
  shared+split  also each group whose rows differ much in length forwarded as two micro-batches,
                short rows and long (rl.split_ragged)
  +products     also attention as plain products where its scores are small (models/attention.py);
                the arms above run the model's stock SDPA attention

    python benchmarks/bench_train_step.py --checkpoint runs/calculator/checkpoints/sft [--threads 2 --reps 2]

One rollout of the recipe (`recipes/calculator.yaml`: 8 tasks x 8, its sampling settings) from the
checkpoint, then `rl_update` on it in each arm, from the same weights and a fresh AdamW each time,
arms interleaved in every repetition. Written to benchmarks/results/train_step.json.
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import time
from contextlib import nullcontext
from pathlib import Path

import torch

from agentic_rl.algorithms import advantages as adv_module
from agentic_rl.data.curriculum import make_sampler
from agentic_rl.engines.hf import HFEngine
from agentic_rl.models import forward as forward_module
from agentic_rl.models.precision import cpu_model
from agentic_rl.rewards.scoring import score_groups
from agentic_rl.rollout.loop import rollout
from agentic_rl.trainer import update as update_module
from agentic_rl.trainer.config import load_config
from agentic_rl.trainer.credit import Credit, compute_credit, outcome_rewards
from agentic_rl.trainer.episodes import episodes
from agentic_rl.trainer.loop import prepare
from agentic_rl.trainer.loss_terms import build_loss
from agentic_rl.trainer.rl_loop import _optimizer, rl_pool
from agentic_rl.types import RolloutBatch

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "train_step.json"


def rollout_step(model, tokenizer, spec, cfg, seed: int):
    """One recipe step's scored groups."""
    rl = cfg.rl
    ep = episodes(spec, cfg.env.options, cfg.rollout)
    tasks = make_sampler(rl.tasks.sampler, rl_pool(spec, rl.tasks, rl.steps, rl.seed), seed=rl.seed).sample(rl.tasks.per_step)
    engine = HFEngine(model, tokenizer, cfg.model.precision)
    groups, _ = rollout(engine, ep.make_env, tasks, rl.tasks.group_size, ep.params, ep.budget, seed=seed)
    return score_groups(ep.reward, groups, ep.budget.step_timeout_s)


def plain_centered(rewards_PG: torch.Tensor) -> torch.Tensor:
    """Centring without the exact-zero rule: r - mean, with its float rounding left in."""
    return rewards_PG - rewards_PG.mean(dim=1, keepdim=True)


def arm_advantages(groups, cfg, arm: str):
    alg = cfg.rl.algorithm
    rewards = outcome_rewards(groups, alg, cfg.rollout.max_episode_tokens)
    if arm != "flat-kept":
        return compute_credit(groups, alg, rewards).advantages
    fixed = adv_module.group_centered
    adv_module.group_centered = plain_centered
    try:
        return compute_credit(groups, alg, rewards).advantages
    finally:
        adv_module.group_centered = fixed


def timed_update(model, weights, groups, advantages, cfg, pad_id: int, switches: tuple[bool, bool, bool]) -> dict:
    """One update from `weights`, with the shared prompt, the ragged split and the attention products
    each on or off (`switches`, in that order)."""
    share, split, products = switches
    model.load_state_dict(weights)
    optimizer = _optimizer(model, None, cfg.rl.optim.lr, cfg.rl.critic.kind.lr)
    real, real_split = update_module.shared_prompt, update_module.split_ragged
    real_attention = forward_module.training_attention
    update_module.shared_prompt = real if share else (lambda *args, **kwargs: None)
    update_module.split_ragged = real_split if split else (lambda micros: micros)
    forward_module.training_attention = real_attention if products else (lambda decoder: nullcontext())
    batch = update_module.UpdateBatch(RolloutBatch(tuple(groups)), Credit(list(advantages)))
    try:
        t0 = time.perf_counter()
        m = update_module.rl_update(model, optimizer, batch, build_loss(cfg, model), cfg.rl.optim, pad_id).metrics
        seconds = time.perf_counter() - t0
    finally:
        update_module.shared_prompt, update_module.split_ragged = real, real_split
        forward_module.training_attention = real_attention
    return {"seconds": seconds, "groups_trained": m["groups_trained"], "trained_tokens": m["trained_tokens"],
            "loss": m["loss"], "grad_norm": m["grad_norm"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--checkpoint", required=True, help="the model RL starts from (the recipe's SFT checkpoint)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    cfg = load_config(ROOT / "recipes" / "calculator.yaml",
                      [f"model.name={args.checkpoint}", "sft.examples=0", f"model.threads={args.threads}",
                       "name=bench-train-step", "hindsight.coef=0"])
    model, tokenizer, spec = prepare(cfg)
    t0 = time.perf_counter()
    groups = rollout_step(model, tokenizer, spec, cfg, args.seed)
    rollout_s = time.perf_counter() - t0
    weights = copy.deepcopy(model.state_dict())
    arms = {"flat-kept": (False, False, False), "per-group": (False, False, False), "shared": (True, False, False),
            "shared+split": (True, True, False), "+products": (True, True, True)}
    advantages = {arm: arm_advantages(groups, cfg, arm) for arm in arms}
    runs: dict[str, list[dict]] = {arm: [] for arm in arms}
    for _ in range(args.reps):
        for arm, switches in arms.items():
            runs[arm].append(timed_update(model, weights, groups, advantages[arm], cfg, tokenizer.pad_token_id,
                                          switches))
            print(arm, {k: round(v, 4) for k, v in runs[arm][-1].items()}, flush=True)
    median = {arm: statistics.median(r["seconds"] for r in rs) for arm, rs in runs.items()}
    out = {
        "machine": {"threads": args.threads, "cpu": cpu_model()},
        "rollout_s": round(rollout_s, 1),
        "groups": len(groups),
        "groups_with_spread": sum(len(set(g.rewards)) > 1 for g in groups),
        "rewards": [list(g.rewards) for g in groups],
        "runs": runs,
        "median_s": {k: round(v, 1) for k, v in median.items()},
        "speedup_vs_flat_kept": {k: round(median["flat-kept"] / v, 2) for k, v in median.items()},
        "speedup_vs_shared": {k: round(median["shared"] / v, 2) for k, v in median.items()},
    }
    RESULTS.write_text(json.dumps(out, indent=2))
    print(json.dumps({k: out[k] for k in ("rollout_s", "groups_with_spread", "median_s", "speedup_vs_flat_kept", "speedup_vs_shared")}))


if __name__ == "__main__":
    main()
