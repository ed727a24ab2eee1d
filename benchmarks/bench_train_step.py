"""Seconds of one GRPO update on a real recipe step, three ways side by side in one run:

  flat-kept     groups of equal rewards trained, as before session 32's fix: eight rewards of 0.1
                averaged to 0.1 + 7e-9 in float32, so their advantages were 0.0074, not 0, and the
                zero-spread filter kept them (reproduced here by centring without the exact-zero rule)
  per-group     the fix: only groups with reward spread trained; each micro-batch forwards its
                whole prompt (system prompt, tools, task)
  shared        the fix, and the system prompt forwarded once for all micro-batches (SharedPrompt)
  shared+split  also each group whose rows differ much in length forwarded as two micro-batches,
                short rows and long (rl.split_ragged, session 38)
  +products     also attention as plain products where its scores are small (trainer/attention.py,
                session 39); the arms above run the model's stock SDPA attention

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
from agentic_rl.engines.base import SamplingParams
from agentic_rl.engines.hf import HFEngine
from agentic_rl.rewards.scoring import score_groups
from agentic_rl.rollout.loop import Budget, rollout
from agentic_rl.trainer import forward as forward_module
from agentic_rl.trainer import rl as rl_module
from agentic_rl.trainer.config import load_config
from agentic_rl.trainer.credit import compute_credit, outcome_rewards
from agentic_rl.trainer.loop import prepare
from agentic_rl.trainer.stages import _optimizer, rl_pool

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "train_step.json"


def rollout_step(model, tokenizer, spec, cfg, seed: int):
    """One recipe step's scored groups."""
    ro, rl = cfg.rollout, cfg.rl
    make_env = lambda: spec.make_env(cfg.env.options)  # noqa: E731
    params = SamplingParams(ro.temperature, ro.top_p, ro.max_new_tokens, make_env().format.stop_strings)
    budget = Budget(ro.max_turns, ro.max_new_tokens, ro.max_episode_tokens, ro.step_timeout_s, ro.max_concurrent)
    tasks = make_sampler(rl.task_sampler, rl_pool(spec, rl), seed=rl.seed).sample(rl.tasks_per_step)
    engine = HFEngine(model, tokenizer, cfg.model.precision)
    groups, _ = rollout(engine, tokenizer, make_env, tasks, rl.group_size, params, budget, seed=seed)
    return score_groups(spec.make_reward(cfg.env.options), groups, ro.step_timeout_s)


def plain_centered(rewards_PG: torch.Tensor) -> torch.Tensor:
    """The centring before the fix: r - mean, with its float rounding left in."""
    return rewards_PG - rewards_PG.mean(dim=1, keepdim=True)


def arm_advantages(groups, cfg, arm: str):
    if arm != "flat-kept":
        return compute_credit(groups, cfg.rl, outcome_rewards(groups, cfg)).advantages
    fixed = adv_module.group_centered
    adv_module.group_centered = plain_centered
    try:
        return compute_credit(groups, cfg.rl, outcome_rewards(groups, cfg)).advantages
    finally:
        adv_module.group_centered = fixed


def timed_update(model, weights, groups, advantages, cfg, pad_id: int, share: bool, split: bool,
                 products: bool) -> dict:
    model.load_state_dict(weights)
    optimizer = _optimizer(model, None, cfg.rl)
    real, real_split, real_attention = rl_module.shared_prompt, rl_module.split_ragged, forward_module.training_attention
    rl_module.shared_prompt = real if share else (lambda *args, **kwargs: None)
    rl_module.split_ragged = real_split if split else (lambda micros: micros)
    forward_module.training_attention = real_attention if products else (lambda decoder: nullcontext())
    try:
        t0 = time.perf_counter()
        m = rl_module.rl_update(model, optimizer, groups, advantages, cfg, pad_id)
        seconds = time.perf_counter() - t0
    finally:
        rl_module.shared_prompt, rl_module.split_ragged = real, real_split
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
                                          *switches))
            print(arm, {k: round(v, 4) for k, v in runs[arm][-1].items()}, flush=True)
    median = {arm: statistics.median(r["seconds"] for r in rs) for arm, rs in runs.items()}
    out = {
        "machine": {"threads": args.threads, "cpu": _cpu()},
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


def _cpu() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return "unknown"


if __name__ == "__main__":
    main()
