"""Every RL algorithm on the calculator main job, from the same SFT checkpoint, side by side.

    python benchmarks/bench_algorithms.py --sft runs/calculator/checkpoints/sft [--only grpo,rloo] [--steps 12]

Each algorithm runs `agentic-rl train recipes/calculator.yaml` with SFT and the baselines off, the
recipe's RL budget (steps x tasks x samples) and its held-out evaluation, one after the other (two
cores: never in parallel). The table (held-out accuracy per split, median seconds per step) is
printed as markdown and written to benchmarks/results/algorithms.json; the SFT checkpoint's own
accuracy is the first row. About 15-20 minutes per algorithm on the 2-core CPU.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "algorithms.json"

# name -> recipe overrides (the docs page of each explains the choice of clip ranges)
ALGORITHMS: dict[str, list[str]] = {
    "grpo": [],
    "dr_grpo": ["rl.algorithm.advantage=dr_grpo", "rl.algorithm.aggregation=seq-mean-token-sum-norm"],
    "rloo": ["rl.algorithm.advantage=rloo"],
    "reinforce_pp": ["rl.algorithm.advantage=reinforce_pp_baseline"],
    "gspo": ["rl.algorithm.policy_loss=gspo", "rl.algorithm.clip_low=3e-4", "rl.algorithm.clip_high=4e-4", "rl.algorithm.aggregation=seq-mean-token-mean"],
    "dapo": ["rl.algorithm.clip_high=0.28", "rl.algorithm.overlong_buffer=64", "rl.tasks.sampler=pass_rate"],
    "cispo": ["rl.algorithm.policy_loss=cispo", "rl.algorithm.clip_high=4.0"],
    "ppo_gae": ["rl.algorithm.advantage=gae", "rl.critic.kind.kind=value_head", "rl.optim.minibatches=2"],
    # GRPO plus rule-based per-turn rewards (tool error, repeated call, empty result): issue 5's
    # process-reward comparison, against the plain "grpo" row from the same start
    "grpo_step_signals": ["rl.algorithm.process_reward=step_signals"],
}


def run(name: str, overrides: list[str], sft: str, steps: int) -> dict:
    out = ROOT / "runs" / f"bench-alg-{name}"
    cmd = [sys.executable, "-m", "agentic_rl.cli", "train", str(ROOT / "recipes" / "calculator.yaml"),
           "--set", f"output_dir={out}", "--set", f"model.name={sft}", "--set", "sft.examples=0",
           "--set", "eval.baselines=false", "--set", f"rl.steps={steps}", "--set", "log.progress=false"]
    for o in overrides:
        cmd += ["--set", o]
    subprocess.run(cmd, check=True, cwd=ROOT)
    ev = json.loads((out / "eval.json").read_text())["rl"]
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    step_s = [r["time_step_s"] for r in rows if r["stage"] == "rl"]
    return {"name": name, "overrides": overrides, "in_template": ev["heldout_in"]["accuracy"],
            "out_of_template": ev["heldout_out"]["accuracy"], "overall": ev["overall"],
            "median_step_s": round(statistics.median(step_s), 1)}


def sft_row(sft: str) -> dict:
    """The starting point's own accuracy; an `agentic-rl eval` already written beside it is reused."""
    out = Path(sft) / "eval.json"
    if not out.exists():
        subprocess.run([sys.executable, "-m", "agentic_rl.cli", "eval", str(ROOT / "recipes" / "calculator.yaml"),
                        "--checkpoint", sft, "--out", str(out)], check=True, cwd=ROOT)
    ev = json.loads(out.read_text())
    ev = ev.get("eval", ev)
    return {"name": "sft (no RL)", "overrides": [], "in_template": ev["heldout_in"]["accuracy"],
            "out_of_template": ev["heldout_out"]["accuracy"], "overall": ev["overall"], "median_step_s": None}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sft", required=True, help="the SFT checkpoint every algorithm starts from")
    ap.add_argument("--only", help="comma-separated algorithm names")
    ap.add_argument("--steps", type=int, default=12)
    args = ap.parse_args()
    names = args.only.split(",") if args.only else list(ALGORITHMS)
    unknown = sorted(set(names) - set(ALGORITHMS))
    if unknown:
        ap.error(f"unknown algorithm(s) {unknown}; known: {', '.join(ALGORITHMS)}")
    # rows accumulate across invocations with the same start and budget (one algorithm per sitting is
    # ~17 minutes), each written as soon as it is measured
    old = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    same = old.get("sft") == args.sft and old.get("steps") == args.steps
    rows = {r["name"]: r for r in (old.get("rows", []) if same else [])}
    rows["sft (no RL)"] = sft_row(args.sft)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    for n in names:
        rows[n] = run(n, ALGORITHMS[n], args.sft, args.steps)
        RESULTS.write_text(json.dumps({"sft": args.sft, "steps": args.steps, "rows": list(rows.values())}, indent=2))
    table = list(rows.values())
    print("| algorithm | in-template | out-of-template | overall | median s / step |\n|---|---|---|---|---|")
    for r in table:
        print(f"| {r['name']} | {r['in_template']:.3f} | {r['out_of_template']:.3f} | {r['overall']:.3f} | "
              f"{r['median_step_s'] if r['median_step_s'] is not None else '—'} |")


if __name__ == "__main__":
    main()
