"""Which templates are within RL's reach: per template, the share of sampled episodes that succeed.

GRPO can only reinforce what it samples. A template whose samples never succeed gives every group
the same reward, so no gradient reaches it however long RL runs. For each checkpoint this samples
`--samples` episodes (the recipe's temperature) on `--tasks` RL-split tasks per template and prints
the success rate and the mean tool calls per episode, template by template, side by side.

    python benchmarks/probe_reach.py runs/a/checkpoints/sft runs/b/checkpoints/sft --tasks 6 --samples 8
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections import defaultdict
from pathlib import Path

import torch

from agentic_rl.engines.base import SamplingParams
from agentic_rl.engines.hf import HFEngine
from agentic_rl.envs.registry import get_env
from agentic_rl.models.loader import load_model
from agentic_rl.rewards.scoring import score_groups
from agentic_rl.rollout.loop import Budget, rollout
from agentic_rl.trainer.config import load_config


def reach(checkpoint: str, cfg, n_tasks: int, samples: int, split: str, seed: int) -> dict[str, dict]:
    model, tokenizer = load_model(checkpoint)
    spec = get_env(cfg.env.name)
    engine = HFEngine(model, tokenizer, cfg.model.precision)
    env_options = dict(cfg.env.options)
    pool = spec.tasks(split, 40 * n_tasks, seed)
    by_template: dict[str, list] = defaultdict(list)
    for t in pool:
        if len(by_template[t.meta["template"]]) < n_tasks:
            by_template[t.meta["template"]].append(t)
    tasks = [t for ts in by_template.values() for t in ts]
    params = SamplingParams(temperature=cfg.rollout.temperature, top_p=cfg.rollout.top_p,
                            max_new_tokens=cfg.rollout.max_new_tokens,
                            stop_strings=spec.make_env(env_options).format.stop_strings)
    # at most 64 episodes' KV caches at a time: all of them at once would take several GB
    budget = Budget(cfg.rollout.max_turns, cfg.rollout.max_new_tokens, cfg.rollout.max_episode_tokens,
                    max_concurrent=64)
    groups, _ = rollout(engine, lambda: spec.make_env(env_options), tasks, samples, params, budget, seed)
    groups = score_groups(spec.make_reward(env_options), groups)
    out: dict[str, dict] = {}
    for g in groups:
        row = out.setdefault(g.task.meta["template"], {"success": [], "calls": [], "flat_groups": 0, "groups": 0})
        correct = [float(t.reward_details.get("correct", 0.0)) for t in g.trajectories]
        row["success"] += correct
        row["calls"] += [sum(len(turn.tool_calls) for turn in t.turns) for t in g.trajectories]
        row["groups"] += 1
        row["flat_groups"] += len(set(correct)) == 1
    return {k: {"success": statistics.fmean(v["success"]), "calls": statistics.fmean(v["calls"]),
                "flat_groups": f"{v['flat_groups']}/{v['groups']}"} for k, v in sorted(out.items())}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("checkpoints", nargs="+")
    ap.add_argument("--recipe", default="recipes/calculator.yaml")
    ap.add_argument("--tasks", type=int, default=6, help="tasks per template")
    ap.add_argument("--samples", type=int, default=8, help="episodes per task")
    ap.add_argument("--split", default="train")
    ap.add_argument("--seed", type=int, default=4242, help="task stream; not the SFT or RL seed")
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    cfg = load_config(args.recipe)
    results = {c: reach(c, cfg, args.tasks, args.samples, args.split, args.seed) for c in args.checkpoints}
    templates = sorted({k for r in results.values() for k in r})
    print("| template | " + " | ".join(Path(c).parts[-3] if len(Path(c).parts) > 2 else c for c in results) + " |")
    print("|---|" + "---|" * len(results))
    for k in templates:
        cells = [f"{r[k]['success']:.2f} ({r[k]['calls']:.1f} calls)" if k in r else "—" for r in results.values()]
        print(f"| {k} | " + " | ".join(cells) + " |")
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
