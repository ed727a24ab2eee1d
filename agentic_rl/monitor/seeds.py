"""`agentic-rl seeds RECIPE --seeds 2,3,4`: one recipe over several RL seeds, and their mean.

A learning figure is a mean over seeds with its interval, never the best seed. Each seed is a
`train` of its own in `<output_dir>/seed<N>` (`rl.seed=N`; `--from CHECKPOINT` starts every seed
from the same SFT checkpoint, without SFT), run one after the other in fresh processes; a seed whose
`eval.json` exists is not run again, and one that stopped part way is resumed. `seeds.json` then
holds, per evaluated stage and split, each seed's accuracy, their mean and the seeds' 95% t-interval
(`monitor/intervals.seed_interval`): what `agentic-rl compare` reads. It covers every evaluated seed
of the folder, the ones asked for and any other `seed<N>` there with an `eval.json`: seeds run one
at a time, or side by side in separate commands, sum up to all of them whichever ends last.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from agentic_rl.monitor.compare import STAGES
from agentic_rl.monitor.intervals import ACCURACY, seed_interval


class SeedFailed(RuntimeError):
    """A seed's training stopped; the seeds before it are kept, and a rerun resumes it. `status` is the
    seed's own exit status (2: a mistake in the recipe or its files, 1: the run stopped)."""

    def __init__(self, message: str, status: int):
        super().__init__(message)
        self.status = status


def run_seeds(recipe: str, seeds: Sequence[int], overrides: Sequence[str], run_dir: Path,
              start: str = "") -> dict:
    """Train every seed not yet evaluated, then write and return `run_dir/seeds.json`."""
    base = [*overrides, *([f"model.name={start}", "sft.examples=0"] if start else [])]
    for seed in seeds:
        out = run_dir / f"seed{seed}"
        if (out / "eval.json").is_file():
            continue
        resume = ["--resume"] if (out / "checkpoints" / "state").is_dir() else []
        cmd = [sys.executable, "-m", "agentic_rl.cli", "train", recipe, *resume,
               *(a for o in [*base, f"rl.seed={seed}", f"output_dir={out}"] for a in ("--set", o))]
        print(f"seed {seed}: {' '.join(cmd[2:])}", flush=True)
        code = subprocess.run(cmd).returncode
        if code:
            raise SeedFailed(f"seed {seed} stopped with exit status {code} (its run folder: {out}); "
                             "run the same command again to resume it", code)
    summary = summarize(run_dir, evaluated(run_dir, seeds))
    (run_dir / "seeds.json").write_text(json.dumps(summary, indent=2))
    return summary


def evaluated(run_dir: Path, seeds: Sequence[int]) -> list[int]:
    """`seeds` and every other seed folder of `run_dir` with an `eval.json`, in order."""
    others = {int(p.parent.name[4:]) for p in run_dir.glob("seed*/eval.json") if p.parent.name[4:].isdigit()}
    return sorted(set(seeds) | others)


def summarize(run_dir: Path, seeds: Sequence[int]) -> dict:
    """Per stage and split (and overall): each seed's accuracy, the mean and the seeds' interval.
    `accuracy` is the last stage evaluated in every seed (RL's, in a full recipe)."""
    evals = [json.loads((run_dir / f"seed{s}" / "eval.json").read_text()) for s in seeds]
    stages = [s for s in STAGES if all(s in e for e in evals)]
    if not stages:
        raise ValueError(f"{run_dir}: the seeds share no evaluated stage")
    by_stage = {stage: _figures([e[stage] for e in evals]) for stage in stages}
    return {"seeds": list(seeds), "stage": stages[0], "accuracy": by_stage[stages[0]], "stages": by_stage}


def _figures(results: list[dict]) -> dict:
    keys = [k for k, v in results[0].items() if isinstance(v, dict)] + ["overall"]
    out = {}
    for k in keys:
        values = [r[k]["accuracy"] if k != "overall" else r[k] for r in results]
        out[k] = {"values": values, "mean": statistics.fmean(values), "interval": list(seed_interval(values, ACCURACY))}
    return out
