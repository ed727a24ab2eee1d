"""How many of a policy's failures hindsight turns into verified corrections, per hint setting.

    python benchmarks/hindsight_yield.py --student runs/X/checkpoints/sft [--teacher DIR] [--tasks 40]

The student samples `--samples` episodes on each of `--tasks` calculator training tasks at
temperature 1 (the recipe's budgets); its failures are handed to the teacher (the student itself
unless `--teacher`) under each setting below, and the verified corrections counted. The settings:

- `answer, ungrounded`: the answer in the hint, every verified correction kept
  (`hindsight.grounded: false`; a copy of the hint's answer passes the verifier);
- `answer, grounded`: the same, but the answer must come out of a tool (the default);
- `solution, restart`: the reference solution's calls in the hint, the episode rewritten from the
  prompt (grounded).

For each: attempts, verified, and how many kept corrections make a tool call in their trained turns. Written to
benchmarks/results/hindsight_yield.json (one key per student/teacher pair).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

from agentic_rl.engines.base import SamplingParams
from agentic_rl.engines.hf import HFEngine
from agentic_rl.envs.registry import get_env
from agentic_rl.models.loader import load_model
from agentic_rl.rewards.scoring import score_groups
from agentic_rl.rollout.hindsight import (
    failed_episodes,
    hindsight_corrections,
    reference_solutions,
)
from agentic_rl.rollout.loop import Budget, rollout
from agentic_rl.trainer.config import HindsightConfig, load_config
from agentic_rl.trainer.episodes import hindsight_options

RESULTS = Path(__file__).resolve().parents[1] / "benchmarks" / "results" / "hindsight_yield.json"


def settings(spec):
    solution = reference_solutions(spec, {})
    return {
        "answer, ungrounded": hindsight_options(HindsightConfig(grounded=False)),
        "answer, grounded": hindsight_options(HindsightConfig()),
        "solution, restart": hindsight_options(HindsightConfig(reveal_answer=False, restart="start"), solution),
    }


def per_template(failed, corrections) -> dict[str, str]:
    """"verified / failed" episodes per template."""
    counts: dict[str, list[int]] = {}
    for t in failed:
        counts.setdefault(t.task.meta.get("template", "?"), [0, 0])[1] += 1
    for c in corrections:
        counts[c.task.meta.get("template", "?")][0] += 1
    return {k: f"{v}/{n}" for k, (v, n) in sorted(counts.items())}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--student", required=True)
    ap.add_argument("--teacher", default="")
    ap.add_argument("--tasks", type=int, default=40)
    ap.add_argument("--samples", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--env", default="", help="env name (default: the recipe's)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    cfg = load_config("recipes/calculator.yaml", [])
    ro = cfg.rollout
    spec = get_env(args.env or cfg.env.name)
    make_env, reward_fn = (lambda: spec.make_env({})), spec.make_reward({})
    params = SamplingParams(ro.temperature, ro.top_p, ro.max_new_tokens, make_env().format.stop_strings)
    budget = Budget(ro.max_turns, ro.max_new_tokens, ro.max_episode_tokens, ro.step_timeout_s, 0)
    model, tokenizer = load_model(args.student)
    student = HFEngine(model, tokenizer, "auto")
    teacher = HFEngine(*load_model(args.teacher), "auto") if args.teacher else student
    groups, _ = rollout(student, make_env, spec.tasks("train", args.tasks, 7), args.samples, params,
                        budget, seed=1)
    failed = failed_episodes(score_groups(reward_fn, groups), 1.0, 10**6)
    row = {"episodes": args.tasks * args.samples, "failed": len(failed)}
    for name, options in settings(spec).items():
        out = hindsight_corrections(teacher, tokenizer, make_env, reward_fn, failed, params, budget, options, seed=3)
        with_tool = sum(any("<tool_call>" in t.action_text for t in c.turns) for c in out.corrections)
        row[name] = {"attempts": out.attempts, "verified": len(out.corrections), "calling_a_tool": with_tool,
                     "by_template": per_template(failed, out.corrections)}
        print(f"{name:20s} {len(out.corrections):3d} of {out.attempts} verified ({with_tool} call a tool)",
              row[name]["by_template"])
    results = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    results[f"{args.student} <- {args.teacher or 'itself'} ({spec.name})"] = row
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
