"""Small groups packed into one forward pass against one forward per group, side by side.

    python benchmarks/bench_micro_batch.py --student runs/calculator/checkpoints/sft \
        [--teacher runs/teacher/checkpoints/sft] [--tasks 16 --group 2 --steps 2]

Runs `agentic-rl train recipes/calculator.yaml` (or `recipes/opd.yaml`, forward-KL OPD, when a
teacher is given) twice from the same checkpoint with `tasks x group` episodes a step: once with
`rl.optim.micro_batch_rows` equal to the group (one forward per group, no packing) and
once with 8 rows (four groups of 2 a forward). Same seed, so step 1 rolls out the same episodes and
trains the same loss; the training seconds of that step are the comparison. Written to
benchmarks/results/micro_batch.json.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "micro_batch.json"


def run(rows: int, args: argparse.Namespace) -> dict:
    out = ROOT / "runs" / f"bench-micro-{rows}"
    recipe = "opd.yaml" if args.teacher else "calculator.yaml"
    cmd = [sys.executable, "-m", "agentic_rl.cli", "train", str(ROOT / "recipes" / recipe),
           "--set", f"output_dir={out}", "--set", f"model.name={args.student}", "--set", "sft.examples=0",
           "--set", "eval.baselines=false", "--set", "eval.tasks_per_split=1", "--set", f"rl.steps={args.steps}",
           "--set", f"rl.tasks.per_step={args.tasks}", "--set", f"rl.tasks.group_size={args.group}",
           "--set", f"rl.optim.micro_batch_rows={rows}", "--set", "log.progress=false"]
    if args.teacher:
        cmd += ["--set", f"distill.teachers=[{args.teacher}]", "--set", "distill.loss=forward"]
    subprocess.run(cmd, check=True, cwd=ROOT)
    steps = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    steps = [s for s in steps if s["stage"] == "rl"]
    return {"micro_batch_rows": rows, "train_s": [round(s["time_train_s"], 1) for s in steps],
            "step_s": [round(s["time_step_s"], 1) for s in steps], "loss_step1": steps[0]["loss"],
            "trained_tokens_step1": steps[0]["trained_tokens"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--student", required=True, help="the checkpoint both arms start from")
    ap.add_argument("--teacher", help="an OPD teacher (forward KL); without one the arms run GRPO")
    ap.add_argument("--tasks", type=int, default=16)
    ap.add_argument("--group", type=int, default=2)
    ap.add_argument("--steps", type=int, default=2)
    args = ap.parse_args()
    arms = [run(args.group, args), run(8, args)]
    result = {"tasks_per_step": args.tasks, "group_size": args.group, "teacher": args.teacher, "arms": arms,
              "train_speedup_step1": round(arms[0]["train_s"][0] / arms[1]["train_s"][0], 2)}
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
