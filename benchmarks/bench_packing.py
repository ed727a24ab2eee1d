"""The RL update padded against packed (`rl.optim.pack`): its time and peak memory, side by side.

    OMP_NUM_THREADS=1 python benchmarks/bench_packing.py [--mixes main_job,long_tail] [--model smollm2]
        [--precision fp32]

Each (mix, arm) is one `rl_update` of SmolLM2-135M-Instruct on the same groups, in a process of its
own (one torch thread, the calculator recipe's precision and loss), after a warm-up update on one
short group: the update's seconds and the growth of the process's peak resident memory over what
it held after the warm-up (`ru_maxrss`), so no arm hides another's peak. SGD, so no optimizer
state enters the peak. The arms: `padded` (micro-batches of `rl.optim.micro_batch_rows` rows, a
ragged group cut in two, `rl.optim.pack: false`) and `packed` (`rl.optim.pack: true`, the default,
micro-batches by the memory estimate's token budget).

The mixes are synthetic episodes of the calculator's shape, token ids drawn at random (the model's
numbers do not depend on which tokens they are), with a 288-token system prompt every group shares
and a 22-token question of each group's own:

  main_job   the main job's trained batch (benchmarks/results/main_job_20steps_half_groups_544ad0f:
             4 groups of 8 trained a step, ~1.9 turns and ~81 generated tokens an episode): 1 to 3
             turns of 10 to 96 generated tokens, 30-token tool results between them
  long_tail  episodes of 200 to 4,000 tokens: 2 groups of 4, lengths log-spaced 200 .. 4,000, with
             `model.gradient_checkpointing` in both arms (padded, a micro-batch of three rows of
             ~1,900 tokens holds ~7 GB of activations without it: killed on a 23 GB machine)

Rows of mixes not run are kept from the existing file, so one mix can be measured again alone.

Written to benchmarks/results/packing.json; with `--precision P` (the recipe's precision replaced,
`fp32` to tell rounding from a difference of the two paths) to packing_P.json.
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "packing.json"
ARMS = {"padded": ["rl.optim.pack=false"], "packed": ["rl.optim.pack=true"]}
MIX_OPTIONS = {"main_job": [], "long_tail": ["model.gradient_checkpointing=true"]}
SYSTEM, QUESTION, OBS = 288, 22, 30


def _ids(gen, n: int) -> tuple[int, ...]:
    return tuple(int(x) for x in gen.integers(300, 40000, n))


def _group(gen, task: int, rows: list[list[int]], rewards: list[float]):
    """A group whose row i has turns generating rows[i] tokens each, tool results between them."""
    from agentic_rl.types import Task, Trajectory, TrajectoryGroup, Turn

    system = tuple(range(1000, 1000 + SYSTEM))
    prompt = system + _ids(gen, QUESTION)
    trajs = []
    for actions, r in zip(rows, rewards):
        turns = [Turn(prompt if k == 0 else _ids(gen, OBS), _ids(gen, n), (-1.0,) * n, "a", "stop")
                 for k, n in enumerate(actions)]
        trajs.append(Trajectory(Task(str(task), "p"), tuple(turns), reward=r))
    return TrajectoryGroup(Task(str(task), "p"), tuple(trajs))


def mix(name: str, seed: int = 0) -> list:
    import numpy as np

    gen = np.random.default_rng(seed)
    if name == "main_job":
        groups = []
        for g in range(4):
            rows = [[int(gen.integers(10, 97)) for _ in range(int(gen.integers(1, 4)))] for _ in range(8)]
            groups.append(_group(gen, g, rows, [float(gen.integers(0, 2)) for _ in range(7)] + [0.5]))
        return groups
    if name == "long_tail":
        own = SYSTEM + QUESTION
        lengths = [round(200 * math.exp(k * math.log(20) / 7)) for k in range(8)]  # 200 .. 4,000
        order = [0, 7, 2, 5, 1, 6, 3, 4]  # each group from both ends of the tail
        groups = []
        for g in range(2):
            rows = [[max(lengths[i] - own, 1)] for i in order[4 * g : 4 * g + 4]]
            groups.append(_group(gen, g, rows, [1.0, 0.0, 0.5, 0.0]))
        return groups
    raise SystemExit(f"unknown mix {name!r}; known: main_job, long_tail")


def run_arm(mix_name: str, arm: str, model_name: str, precision: str = "") -> dict:
    """In this process: a warm-up update, then the measured one."""
    import torch

    from agentic_rl.models.loader import enable_gradient_checkpointing, load_model
    from agentic_rl.trainer.config import load_config
    from agentic_rl.trainer.credit import compute_credit
    from agentic_rl.trainer.loss_terms import build_loss
    from agentic_rl.trainer.update import UpdateBatch, rl_update
    from agentic_rl.types import RolloutBatch

    torch.set_num_threads(1)
    cfg = load_config(str(ROOT / "recipes" / "calculator.yaml"),
                      [f"model.name={model_name}", *ARMS[arm], *MIX_OPTIONS[mix_name],
                       *([f"model.precision={precision}"] if precision else [])])
    model, tokenizer = load_model(model_name)
    if cfg.model.gradient_checkpointing:
        enable_gradient_checkpointing(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.0)  # no state; the weights stay as loaded
    loss = build_loss(cfg, model)

    def one(groups) -> dict:
        batch = UpdateBatch(RolloutBatch(tuple(groups)), compute_credit(groups, cfg.rl.algorithm))
        return rl_update(model, optimizer, batch, loss, cfg.rl.optim, tokenizer.pad_token_id).metrics

    one(mix("main_job", seed=99)[:1])
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    groups = mix(mix_name)
    t0 = time.perf_counter()
    metrics = one(groups)
    seconds = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    tokens = sum(len(t.token_ids()) for g in groups for t in g.trajectories)
    return {"mix": mix_name, "arm": arm, "update_s": round(seconds, 2), "peak_growth_gb": round((peak - base) / 2**20, 3),
            "episode_tokens": tokens, "trained_tokens": metrics["trained_tokens"], "loss": metrics["loss"],
            "grad_norm": metrics["grad_norm"], "precision": cfg.model.precision,
            "gradient_checkpointing": cfg.model.gradient_checkpointing}


def main() -> None:
    from agentic_rl.models.precision import cpu_model

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--mixes", default="main_job,long_tail")
    p.add_argument("--model", default="smollm2")
    p.add_argument("--arm", nargs=2, metavar=("MIX", "ARM"), help=argparse.SUPPRESS)  # one arm, in this process
    p.add_argument("--precision", default="", help="replace the recipe's model.precision (fp32, bf16)")
    p.add_argument("--out", type=Path, default=None)
    args = p.parse_args()
    if args.arm:
        print(json.dumps(run_arm(*args.arm, args.model, args.precision)))
        return
    args.out = args.out or (RESULTS.with_name(f"packing_{args.precision}.json") if args.precision else RESULTS)
    mixes = args.mixes.split(",")
    kept = json.loads(args.out.read_text())["arms"] if args.out.exists() else []
    rows = [r for r in kept if r["mix"] not in mixes]
    for m in mixes:
        for arm in ARMS:
            out = subprocess.run([sys.executable, __file__, "--arm", m, arm, "--model", args.model,
                                  "--precision", args.precision], check=True,
                                 cwd=ROOT, capture_output=True, text=True).stdout
            rows.append(json.loads(out.strip().splitlines()[-1]))
            print(json.dumps(rows[-1]), flush=True)
    ratios = {}
    for m in sorted({r["mix"] for r in rows}):
        pad, pack = (next(r for r in rows if r["mix"] == m and r["arm"] == a) for a in ARMS)
        ratios[m] = {"time_padded_over_packed": round(pad["update_s"] / pack["update_s"], 2),
                     "peak_padded_over_packed": round(pad["peak_growth_gb"] / max(pack["peak_growth_gb"], 1e-3), 2),
                     "grad_norm_rel_diff": abs(pad["grad_norm"] - pack["grad_norm"]) / max(pad["grad_norm"], 1e-12)}
    result = {"model": args.model, "threads": 1, "date": time.strftime("%Y-%m-%d"), "cpu": cpu_model(), "arms": rows,
              "ratios": ratios}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(ratios, indent=1))


if __name__ == "__main__":
    main()
