"""Gradient checkpointing against none, side by side: peak memory and training seconds.

    python benchmarks/bench_grad_checkpointing.py --student runs/calculator/checkpoints/sft [--steps 3]

Runs the calculator recipe's GRPO steps twice from the same checkpoint and seed, once with
`model.gradient_checkpointing` and once without, one after the other (never side by side: the
timing and the peak are each process's own). Step 1 rolls out the same episodes in both arms, so its
training seconds compare like for like; later steps may sample differently (float noise in the
update). Reports per step the process's peak RSS so far (`mem_peak_rss_gb`, which includes the
sampler and its KV caches) and the memory guard's estimate. Written to
benchmarks/results/grad_checkpointing.json.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "grad_checkpointing.json"


def arm(checkpointing: bool, args: argparse.Namespace) -> dict:
    out = ROOT / "runs" / f"bench-ckpt-{'on' if checkpointing else 'off'}"
    cmd = [sys.executable, "-m", "agentic_rl.cli", "train", str(ROOT / "recipes" / "calculator.yaml"),
           "--set", f"output_dir={out}", "--set", f"model.name={args.student}", "--set", "sft.examples=0",
           "--set", "eval.baselines=false", "--set", "eval.tasks_per_split=1", "--set", f"rl.steps={args.steps}",
           "--set", f"model.gradient_checkpointing={str(checkpointing).lower()}", "--set", "log.progress=false",
           "--set", f"model.threads={args.threads}", "--set", "checkpoint.every=1000"]
    subprocess.run(cmd, check=True, cwd=ROOT)
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    steps = [r for r in rows if r["stage"] == "rl"]
    [estimate] = [r for r in rows if r.get("event") == "memory_estimate"]
    return {"gradient_checkpointing": checkpointing,
            "estimate_gb": estimate["mem_estimate_gb"], "estimate_activations_gb": estimate["mem_activations_gb"],
            "peak_rss_gb": [round(s["mem_peak_rss_gb"], 2) for s in steps],
            "train_s": [round(s["time_train_s"], 1) for s in steps],
            "step_s": [round(s["time_step_s"], 1) for s in steps],
            "trained_tokens": [s["trained_tokens"] for s in steps], "loss_step1": steps[0]["loss"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--student", required=True, help="the checkpoint both arms start from")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    off, on = arm(False, args), arm(True, args)
    result = {"steps": args.steps, "threads": args.threads, "arms": [off, on],
              "peak_ratio": round(on["peak_rss_gb"][-1] / off["peak_rss_gb"][-1], 2),
              "train_time_ratio_step1": round(on["train_s"][0] / off["train_s"][0], 2)}
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
