"""Rollouts of a LoRA policy: sampling from a merged copy against sampling through the adapters.

    python benchmarks/bench_lora_rollout.py [--model smollm2] [--rank 16] [--repeats 3]

The main job's rollout batch (4 calculator tasks x 8 samples, temperature 1, the recipe's token
budgets) is sampled from a LoRA policy in bf16 by two engines, alternately, `--repeats` times each:
the engine as it is (a plain copy with the adapters merged in, re-merged at each `sync_weights`)
and the alternative (a bf16 copy of the PEFT model, whose every projection runs the base
matmul plus the two adapter matmuls). The adapters are given random B values, as after training,
so the merged weights really differ from the base. Reports seconds per rollout, generated tokens
per second and the cost of one weight sync; written to benchmarks/results/lora_rollout.json.
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import time
from pathlib import Path

import torch

from agentic_rl.engines.base import SamplingParams
from agentic_rl.engines.hf import HFEngine
from agentic_rl.envs.registry import get_env
from agentic_rl.models.loader import load_model
from agentic_rl.models.lora import apply_lora
from agentic_rl.rollout.loop import Budget, rollout
from agentic_rl.trainer.config import load_config

RESULTS = Path(__file__).resolve().parents[1] / "benchmarks" / "results" / "lora_rollout.json"


def unmerged_engine(model, tokenizer) -> HFEngine:
    """The alternative to the merged copy: sampling a LoRA policy through a bf16 copy of the PEFT model."""
    engine = HFEngine(model, tokenizer, "bf16")
    engine._merged = None
    engine._infer = copy.deepcopy(model).to(torch.bfloat16).eval()
    return engine


def timed_rollout(engine, tokenizer, spec, cfg, tasks) -> dict:
    ro = cfg.rollout
    make_env = lambda: spec.make_env(cfg.env.options)  # noqa: E731
    params = SamplingParams(ro.temperature, ro.top_p, ro.max_new_tokens, make_env().format.stop_strings)
    budget = Budget(ro.max_turns, ro.max_new_tokens, ro.max_episode_tokens)
    start = time.perf_counter()
    _, stats = rollout(engine, make_env, tasks, cfg.rl.tasks.group_size, params, budget, seed=0)
    seconds = time.perf_counter() - start
    return {"seconds": seconds, "tokens": stats.generated_tokens, "tokens_per_s": stats.generated_tokens / seconds}


def timed_sync(engine) -> float:
    start = time.perf_counter()
    engine.sync_weights()
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="smollm2")
    ap.add_argument("--rank", type=int, default=16)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    cfg = load_config(Path(__file__).resolve().parents[1] / "recipes" / "calculator.yaml", [f"model.name={args.model}"])
    model, tokenizer = load_model(args.model)
    model = apply_lora(model, args.rank, cfg.model.lora_alpha)
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 1e-3, generator=gen)
    spec = get_env(cfg.env.name)
    tasks = spec.tasks("train", cfg.rl.tasks.per_step, seed=11)
    engines = {"merged": HFEngine(model, tokenizer, "bf16"), "adapters": unmerged_engine(model, tokenizer)}
    runs: dict[str, list[dict]] = {name: [] for name in engines}
    syncs: dict[str, list[float]] = {name: [] for name in engines}
    for _ in range(args.repeats):
        for name, engine in engines.items():
            syncs[name].append(timed_sync(engine))
            runs[name].append(timed_rollout(engine, tokenizer, spec, cfg, tasks))
    arms = {name: {"seconds": [round(r["seconds"], 1) for r in rs],
                   "tokens": [r["tokens"] for r in rs],
                   "median_tokens_per_s": round(statistics.median(r["tokens_per_s"] for r in rs), 1),
                   "median_sync_s": round(statistics.median(syncs[name]), 3)} for name, rs in runs.items()}
    result = {"model": args.model, "lora_rank": args.rank, "episodes": len(tasks) * cfg.rl.tasks.group_size,
              "threads": args.threads, "arms": arms,
              "tokens_per_s_ratio": round(arms["merged"]["median_tokens_per_s"] / arms["adapters"]["median_tokens_per_s"], 2)}
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
