"""Print a run's held-out results (eval.json) as a markdown table: accuracy per stage and split."""

from __future__ import annotations

import json
import sys
from pathlib import Path

LABELS = {"base_zero_shot": "base, zero-shot", "base_few_shot": "base, two-example tool prompt",
          "sft": "after SFT", "rl": "after SFT + GRPO"}


def main(run_dir: str) -> None:
    results = json.loads((Path(run_dir) / "eval.json").read_text())
    print("| model | in-template | out-of-template | overall | tool calls / episode | format |")
    print("|---|---|---|---|---|---|")
    for key, label in LABELS.items():
        if key not in results:
            continue
        r = results[key]
        splits = [s for s in ("heldout_in", "heldout_out") if s in r]
        calls = sum(r[s]["tool_calls_per_episode"] for s in splits) / len(splits)
        fmt = sum(r[s]["format_rate"] for s in splits) / len(splits)
        n = "/".join(str(r[s]["n"]) for s in splits)
        cells = [f"{r[s]['accuracy']:.3f}" for s in ("heldout_in", "heldout_out") if s in r]
        print(f"| {label} | {' | '.join(cells)} | {r['overall']:.3f} | {calls:.2f} | {fmt:.2f} |  <!-- n={n} -->")
    print(f"\ntiming (s): {results.get('timing_s')}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "runs/calculator")
