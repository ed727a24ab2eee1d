"""Summarize an `rl.max_staleness` study (benchmarks/staleness.sh): the step-time split per k (the
timing runs, on an otherwise idle machine), the held-out accuracy per k over seeds (mean, 95%
t-interval; paired differences against k = 0) and the sampler-trainer gap by staleness.

    python benchmarks/staleness_table.py RESULTS_DIR

RESULTS_DIR holds `vllm-k{K}-time/` (a few steps with vLLM as the sampler) and `k{K}-seed{S}/` (the
main job's RL stage); each with metrics.jsonl (and eval.json for the seeds).
"""

from __future__ import annotations

import json
import statistics as st
import sys
from pathlib import Path

T95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571}  # two-sided 95% t quantiles by degrees of freedom


def interval(xs: list[float]) -> str:
    if len(xs) < 2:
        return f"{xs[0]:.3f} (1 seed)" if xs else "-"
    return f"{st.mean(xs):.3f} ± {T95[len(xs) - 1] * st.stdev(xs) / len(xs) ** 0.5:.3f}"


def split(run: Path) -> dict[str, float]:
    """Mean seconds per RL step from step 2 on (step 1 warms up and has no overlap)."""
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    steps = [r for r in rows if r.get("stage") == "rl" and "time_step_s" in r][1:]
    keys = ("time_step_s", "time_rollout_s", "time_train_s", "time_sync_s", "time_wait_data_s", "time_wait_weights_s")
    return {k: st.mean(r.get(k, 0.0) for r in steps) for k in keys} | {"steps": len(steps)}


def accuracy(run: Path, key: str = "overall") -> float:
    r = json.loads((run / "eval.json").read_text())["rl"]
    return r[key] if key == "overall" else r[key]["accuracy"]


def main(root: str) -> None:
    base = Path(root)
    print("| k | step (s) | rollout (s) | update (s) | sync (s) | trainer waited for data (s) | producer waited for "
          "weights (s) | steps |")
    print("|---|---|---|---|---|---|---|---|")
    for run in sorted(base.glob("vllm-k*-time")):
        s = split(run)
        print(f"| {run.name[6]} | {s['time_step_s']:.1f} | {s['time_rollout_s']:.1f} | {s['time_train_s']:.1f} | "
              f"{s['time_sync_s']:.1f} | {s['time_wait_data_s']:.1f} | {s['time_wait_weights_s']:.1f} | {s['steps']} |")
    ks = sorted({p.name.split("-")[0] for p in base.glob("k*-seed*")})
    print("\n| k | seeds | overall | in-template | out-of-template | paired vs k = 0 |")
    print("|---|---|---|---|---|---|")
    ref = {p.name.split("seed")[1]: p for p in base.glob("k0-seed*") if (p / "eval.json").exists()}
    for k in ks:
        runs = {p.name.split("seed")[1]: p for p in sorted(base.glob(f"{k}-seed*")) if (p / "eval.json").exists()}
        if not runs:
            continue
        cells = [interval([accuracy(r, key) for r in runs.values()]) for key in ("overall", "heldout_in", "heldout_out")]
        paired = [accuracy(r) - accuracy(ref[s]) for s, r in runs.items() if s in ref] if k != "k0" else []
        print(f"| {k[1:]} | {','.join(runs)} | {' | '.join(cells)} | {interval(paired) if paired else '-'} |")
    print("\n| k | sampler-trainer gap a token, by the batch's staleness |")
    print("|---|---|")
    for k in ks:
        gaps = mismatch_by_staleness(sorted(base.glob(f"{k}-seed*")))
        print(f"| {k[1:]} | " + ", ".join(f"{s}: {g:.4f}" for s, g in gaps.items()) + " |")


def mismatch_by_staleness(runs: list[Path]) -> dict[int, float]:
    """Mean |sampler logprob - trainer logprob| a token (the rollout correction's figure) by the
    batches' staleness (no `staleness` key: k = 0, every batch 0)."""
    by: dict[int, list[float]] = {}
    for run in runs:
        for r in map(json.loads, (run / "metrics.jsonl").read_text().splitlines()):
            if r.get("stage") == "rl" and "mismatch_logprob_abs_mean" in r:
                by.setdefault(r.get("staleness", 0), []).append(r["mismatch_logprob_abs_mean"])
    return {s: st.mean(v) for s, v in sorted(by.items())}


if __name__ == "__main__":
    main(sys.argv[1])
