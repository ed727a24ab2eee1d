"""Where a two-step calculator task turns: after the first tool result, does a model open a second call?

For each held-out in-template task of a two-step template, the probed policy (`--policy`) runs
greedily. Where it makes exactly one call and then answers, the episode is cut at the start of its
second action (prompt, first action, tool result). Every model in `--models` is scored there:
whether its greedy next action opens a second call (the first `--look` greedy tokens contain
"<tool_call>") rather than writing an answer. Greedy throughout, so the probe is deterministic.

    python benchmarks/probe_second_call.py --policy runs/opd-fwd/checkpoints/rl \
        --models runs/sft128-x1/checkpoints/sft runs/opd-fwd/checkpoints/rl runs/sft128-x3/checkpoints/sft
"""

from __future__ import annotations

import argparse
import json

import torch

from agentic_rl.engines.base import SamplingParams
from agentic_rl.engines.hf import HFEngine
from agentic_rl.envs.registry import get_env
from agentic_rl.models.loader import load_model
from agentic_rl.rollout.loop import Budget, rollout
from agentic_rl.trainer.config import load_config


def _cut_points(policy: str, cfg, spec, tasks):
    model, tok = load_model(policy)
    env_opts = dict(cfg.env.options)
    fmt = spec.make_env(env_opts).format
    params = SamplingParams(temperature=0.0, max_new_tokens=cfg.rollout.max_new_tokens, stop_strings=fmt.stop_strings)
    budget = Budget(cfg.rollout.max_turns, cfg.rollout.max_new_tokens, cfg.rollout.max_episode_tokens)
    groups, _ = rollout(HFEngine(model, tok, cfg.model.precision), lambda: spec.make_env(env_opts), tasks, 1, params, budget)
    cuts = []
    for g in groups:
        t = g.trajectories[0]
        if len(t.turns) >= 2 and len(t.turns[0].tool_calls) == 1 and "<tool_call>" not in t.turns[1].action_text:
            prefix = [*t.turns[0].obs_ids, *t.turns[0].action_ids, *t.turns[1].obs_ids]
            cuts.append((t.task.meta.get("template"), prefix))
    return cuts, tok


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="recipes/calculator.yaml")
    ap.add_argument("--policy", required=True)
    ap.add_argument("--models", nargs="+", required=True)
    ap.add_argument("--look", type=int, default=24)
    args = ap.parse_args()
    torch.set_num_threads(1)
    cfg = load_config(args.config)
    spec = get_env(cfg.env.name)
    tasks = [t for t in spec.tasks("heldout_in", cfg.eval.tasks_per_split, cfg.eval.seed) if t.meta.get("family") == "two_step"]
    cuts, tok = _cut_points(args.policy, cfg, spec, tasks)
    report = {"policy": args.policy, "two_step_tasks": len(tasks), "one_call_then_answer": len(cuts), "models": {}}
    look = SamplingParams(temperature=0.0, max_new_tokens=args.look)  # no stop string: read past the tag
    for name in args.models:
        model, _ = load_model(name)
        samples = HFEngine(model, tok, "fp32").session().generate(dict(enumerate(p for _, p in cuts)), look)
        opens = {}
        for i, (template, _) in enumerate(cuts):
            opens.setdefault(template, []).append("<tool_call>" in samples[i].text)
        report["models"][name] = {t: f"{sum(v)}/{len(v)}" for t, v in sorted(opens.items())}
        report["models"][name]["all"] = f"{sum(sum(v) for v in opens.values())}/{len(cuts)}"
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
