"""The engine's decoding, with and without its CPU decode paths, side by side in one process.

    python benchmarks/bench_decode.py [--model smollm2] [--threads 2] [--repeats 2] [--zero-shot]

Two workloads of the main job, at `recipes/calculator.yaml`'s sizes: a held-out evaluation batch
(`eval.batch_size` calculator tasks, greedy, the two-example prompt of the base-model baseline or
zero-shot with `--zero-shot`) and a GRPO rollout batch (`rl.tasks.per_step` x `rl.tasks.group_size` at
`rollout.temperature`). Each runs under four engine settings, alternately, `--repeats` times:

  stock               the shared prompt prefix copied into every row's cache, the logits by the
                      model's own head, every forward as wide as its widest chunk
  head                the logits by vocabulary slices (engines/head.py)
  prefix+head         also the prefix kept once and read by cascade attention
                      (engines/prefix_attention.py)
  prefix+head+narrow  also observations fed in forwards of their own rows and the cache's padding
                      columns dropped (engines/kv_cache.py)

Reports the best seconds per batch, tokens/s, the speed-up over stock, and whether the generated
tokens are identical; written to benchmarks/results/decode.json.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from agentic_rl.engines.base import SamplingParams
from agentic_rl.engines.hf import HFEngine
from agentic_rl.envs.registry import get_env
from agentic_rl.models.loader import load_model
from agentic_rl.rollout.loop import Budget, rollout
from agentic_rl.trainer.config import load_config

RESULTS = Path(__file__).resolve().parents[1] / "benchmarks" / "results" / "decode.json"
SETTINGS = {"stock": (False, False, False), "head": (False, True, False), "prefix+head": (True, True, False),
            "prefix+head+narrow": (True, True, True)}


def workloads(spec, cfg, fewshot: bool) -> dict:
    options = {**cfg.env.options, "fewshot": fewshot}
    stop = spec.make_env(options).format.stop_strings
    budget = Budget(cfg.rollout.max_turns, cfg.rollout.max_new_tokens, cfg.rollout.max_episode_tokens)
    greedy = SamplingParams(temperature=0.0, max_new_tokens=cfg.rollout.max_new_tokens, stop_strings=stop)
    sampled = SamplingParams(temperature=cfg.rollout.temperature, max_new_tokens=cfg.rollout.max_new_tokens,
                             stop_strings=stop)
    n, tasks, group = cfg.eval.batch_size, cfg.rl.tasks.per_step, cfg.rl.tasks.group_size
    return {
        f"eval, {n} tasks greedy": (spec.tasks("heldout_in", n, cfg.eval.seed), 1, greedy, options, budget),
        f"rollout, {tasks} tasks x {group}": (spec.tasks("train", tasks, 0), group, sampled, {**cfg.env.options}, budget),
    }


def run(engine, tokenizer, spec, work) -> tuple[float, int, list]:
    tasks, group, params, options, budget = work
    start = time.perf_counter()
    groups, stats = rollout(engine, lambda: spec.make_env(options), tasks, group, params, budget, seed=0)
    ids = [t.token_ids() for g in groups for t in g.trajectories]
    return time.perf_counter() - start, stats.generated_tokens, ids


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="smollm2")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--zero-shot", action="store_true")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    cfg = load_config("recipes/calculator.yaml", ["log.progress=false"])
    model, tokenizer = load_model(args.model)
    engine = HFEngine(model, tokenizer, cfg.model.precision)
    spec = get_env(cfg.env.name)
    report = {"model": args.model, "threads": args.threads, "dtype": str(engine.dtype), "workloads": {}}
    for name, work in workloads(spec, cfg, fewshot=not args.zero_shot).items():
        seconds = {s: [] for s in SETTINGS}
        tokens, outputs = {}, {}
        for _ in range(args.repeats):
            for setting, (shared, split, narrow) in SETTINGS.items():
                engine.shares_prefix, engine.last_logits.split, engine.narrow_feeds = shared, split, narrow
                dt, tokens[setting], outputs[setting] = run(engine, tokenizer, spec, work)
                seconds[setting].append(dt)
                print(f"{name:24s} {setting:12s} {dt:6.1f} s  {tokens[setting]} tokens", flush=True)
        best = {s: min(v) for s, v in seconds.items()}
        report["workloads"][name] = {
            s: {"seconds": round(best[s], 2), "tokens": tokens[s], "tokens_per_s": round(tokens[s] / best[s], 1),
                "speedup": round(best["stock"] / best[s], 3), "same_tokens_as_stock": outputs[s] == outputs["stock"],
                "all_seconds": [round(x, 2) for x in seconds[s]]}
            for s in SETTINGS
        }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report["workloads"], indent=2))


if __name__ == "__main__":
    main()
