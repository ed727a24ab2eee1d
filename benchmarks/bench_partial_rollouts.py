"""Step time and trainer idle time with and without partial rollouts, side by side, at k = 1.

    PYTHONPATH=. python benchmarks/bench_partial_rollouts.py [--steps 16] [--repeats 3] [--out FILE.json]

The tiny recipe (random model, fp32, one torch thread) on the `long_tail` env
(tests/rollout/long_tail_env.py: the calculator's tasks, each episode of a scripted 1 to 8 turns,
P(n turns) = 2^-n), `rl.max_staleness: 1`, 4 tasks x 2 episodes a step, 8 tokens a turn. Two arms,
run one after the other in this process, each from the same seed: `whole` (every episode to its
end within its step's round) and `partial` (`rl.partial_rollout: {turns_per_version: 2,
max_versions: 4}`). Per arm, over the steps after the first (the first has nothing to overlap):
the mean step time (`time_step_s`), the mean time the trainer waited for its batch in `take`
(`time_wait_data_s`: its idle time), the trained groups and tokens a second of wall time (a partial
round trains the groups it ends, so its batches vary in size: the per-step figures alone would
flatter it), and the staleness per token. The arms share the machine with whatever else runs: run
it on an idle one for timings.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

BASE = ["log.progress=false", "log.tensorboard=false", "eval.baselines=false", "eval.tasks_per_split=1",
        "sft.examples=0", "env.name=long_tail", "rollout.max_turns=8", "rl.tasks.group_size=2", "rl.max_staleness=1",
        "checkpoint.every=1000", "model.threads=1"]


def arms(args) -> dict[str, list[str]]:
    shape = [f"rl.tasks.per_step={args.per_step}", f"rollout.max_new_tokens={args.tokens}",
             f"rollout.max_episode_tokens={8 * args.tokens}", f"rl.steps={args.steps}",
             f"rl.algorithm.entropy_coef={args.entropy_coef}"]
    return {"whole": shape, "partial": [*shape, f"rl.partial_rollout.turns_per_version={args.turns_per_version}",
                                        f"rl.partial_rollout.max_versions={args.max_versions}"]}


def _counting_forwards() -> dict:
    """Count the sampler's forward passes and the token slots they compute (rows x width, padding
    included): what a round costs the engine, whatever else the machine runs."""
    from agentic_rl.engines import hf

    count, forward = {"forwards": 0, "token_slots": 0}, hf.HFSession._forward

    def counted(self, ids, *args, **kwargs):
        count["forwards"] += 1
        count["token_slots"] += int(ids.numel())
        return forward(self, ids, *args, **kwargs)
    hf.HFSession._forward = counted
    return count


COUNT = _counting_forwards()


def arm(overrides: list[str], out: Path) -> dict:
    from agentic_rl.trainer.config import load_config
    from agentic_rl.trainer.loop import train

    before = dict(COUNT)
    t0 = time.perf_counter()
    train(load_config("recipes/tiny.yaml", [*BASE, *overrides, f"output_dir={out}"]))
    wall = time.perf_counter() - t0
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    rows = [r for r in rows if r.get("stage") == "rl" and "weight_version" in r]
    later = rows[1:]
    span = sum(r["time_step_s"] for r in later)
    return {
        "steps": len(rows), "run_wall_s": round(wall, 2),
        # the sampler's work over the run (the evaluation's included, the same in both arms)
        "sampler_forwards": COUNT["forwards"] - before["forwards"],
        "sampler_token_slots": COUNT["token_slots"] - before["token_slots"],
        "step_s_mean": round(statistics.mean(r["time_step_s"] for r in later), 3),
        "step_s_max": round(max(r["time_step_s"] for r in later), 3),
        "trainer_idle_s_mean": round(statistics.mean(r["time_wait_data_s"] + r["time_wait_sync_s"] for r in later), 3),
        "trainer_wait_take_s_mean": round(statistics.mean(r["time_wait_data_s"] for r in later), 3),
        "trainer_wait_sync_s_mean": round(statistics.mean(r["time_wait_sync_s"] for r in later), 3),
        "rollout_s_mean": round(statistics.mean(r["time_rollout_s"] for r in later), 3),
        "producer_wait_s_mean": round(statistics.mean(r["time_wait_weights_s"] for r in later), 3),
        "groups_trained": sum(r["groups_kept"] for r in rows),
        "groups_per_s": round(sum(r["groups_kept"] for r in later) / span, 3),
        "trained_tokens_per_s": round(sum(r["trained_tokens"] for r in later) / span, 2),
        "staleness_max": max(r.get("staleness", 0) for r in rows),
        "staleness_mean": round(statistics.mean(r.get("staleness_mean", r.get("staleness", 0)) for r in rows), 3),
        "episodes_span_cut": sum(r.get("partial/episodes_span_cut", 0) for r in rows),
        "per_step": [{k: r.get(k) for k in ("step", "time_step_s", "time_rollout_s", "time_wait_data_s", "time_wait_sync_s",
                                            "groups_kept", "staleness", "staleness_mean")} for r in rows],
    }


def _median(runs: list[dict]) -> dict:
    """The median over repeats of every timing figure; the counts, equal in every repeat (the runs
    are deterministic), from the first; the first repeat's per-step rows."""
    out = dict(runs[0])
    for k in ("run_wall_s", "step_s_mean", "step_s_max", "trainer_idle_s_mean", "trainer_wait_take_s_mean",
              "trainer_wait_sync_s_mean", "rollout_s_mean", "producer_wait_s_mean", "groups_per_s"):
        out[k] = round(statistics.median(r[k] for r in runs), 3)
    return out


def main() -> None:
    import torch

    from tests.rollout.long_tail_env import register

    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=16)
    p.add_argument("--repeats", type=int, default=3, help="each arm this many times, alternating")
    p.add_argument("--per-step", type=int, default=8, help="tasks a step (2 episodes each)")
    p.add_argument("--tokens", type=int, default=16, help="rollout.max_new_tokens (a turn)")
    p.add_argument("--turns-per-version", type=int, default=1)
    p.add_argument("--max-versions", type=int, default=4)
    p.add_argument("--entropy-coef", type=float, default=0.0,
                   help="0: the tiny model earns no reward, so the update has nothing to train and the rollout "
                        "bounds the step; 0.01: an entropy bonus gives every token a gradient (the update bounds it)")
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks/results/partial_rollouts.json")
    args = p.parse_args()
    torch.set_num_threads(1)
    register()
    runs: dict[str, list[dict]] = {name: [] for name in arms(args)}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.repeats):  # alternating, so a change in the machine's load hits both arms
            for name, overrides in arms(args).items():
                runs[name].append(arm(overrides, Path(tmp) / f"{name}{r}"))
    results = {name: _median(rs) for name, rs in runs.items()}
    w, pr = results["whole"], results["partial"]
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    command = (f"PYTHONPATH=. python benchmarks/bench_partial_rollouts.py --steps {args.steps} --per-step {args.per_step} "
               f"--tokens {args.tokens} --turns-per-version {args.turns_per_version} --max-versions {args.max_versions} "
               f"--entropy-coef {args.entropy_coef:g}")
    report = {"command": command, "overrides": arms(args),
              "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "commit": commit,
              "load_average_after": os.getloadavg(), "arms": results, "runs": runs,
              "ratios_whole_over_partial": {
                  "step_s_mean": round(w["step_s_mean"] / pr["step_s_mean"], 3),
                  "trainer_idle_s_mean": round(w["trainer_idle_s_mean"] / max(pr["trainer_idle_s_mean"], 1e-9), 3),
                  "groups_per_s": round(w["groups_per_s"] / pr["groups_per_s"], 3),
                  "sampler_forwards": round(w["sampler_forwards"] / pr["sampler_forwards"], 3),
                  "sampler_token_slots": round(w["sampler_token_slots"] / pr["sampler_token_slots"], 3)}}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1) + "\n")
    print(json.dumps({k: v for k, v in report.items() if k not in ("arms", "runs", "overrides")}, indent=1))
    for name, r in results.items():
        print(name, {k: v for k, v in r.items() if k != "per_step"})


if __name__ == "__main__":
    main()
