"""Decode throughput of the policy's samplers side by side, on the main job's prompts:

    python benchmarks/bench_engines.py [--model smollm2] [--batches 1 8 32] [--repeats 2]
                                       [--vllm-python .venv-vllm/bin/python | --vllm-url URL]

`embedded` (this process), `served` (`agentic-rl serve` in a child process, through the served
engine: HTTP, token ids, the whole prefix a turn) and, with `--vllm-python` (a vLLM server started
as `rollout.engine.name: managed_vllm` starts it) or `--vllm-url`, vLLM through the same client. Each batch is B distinct calculator training prompts rolled out to the end of their
episodes at the recipe's temperature (tool calls answered by the env, as in training); the engines
take turns, `--repeats` times, and the best time counts. Reports generated tokens/s and each
engine's ratio to vLLM's (or to the embedded engine's without vLLM); writes
benchmarks/results/engines.json.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import tempfile
import time
from pathlib import Path

import torch

from agentic_rl.engines.base import SamplingParams
from agentic_rl.engines.hf import HFEngine
from agentic_rl.engines.managed import serve_command, start_server, stop_server, vllm_command
from agentic_rl.engines.served import ServedEngine
from agentic_rl.envs.registry import get_env
from agentic_rl.models.checkpoint import save_checkpoint
from agentic_rl.models.loader import load_model
from agentic_rl.rollout.loop import Budget, rollout
from agentic_rl.trainer.config import load_config

RESULTS = Path(__file__).resolve().parent / "results" / "engines.json"


def tokens_per_s(engine, tokenizer, spec, cfg, batch: int) -> tuple[float, int]:
    options = dict(cfg.env.options)
    stop = spec.make_env(options).format.stop_strings
    params = SamplingParams(cfg.rollout.temperature, 1.0, cfg.rollout.max_new_tokens, stop)
    budget = Budget(cfg.rollout.max_turns, cfg.rollout.max_new_tokens, cfg.rollout.max_episode_tokens)
    start = time.perf_counter()
    _, stats = rollout(engine, lambda: spec.make_env(options), spec.tasks("train", batch, 0), 1, params,
                       budget, seed=0)
    return stats.generated_tokens / (time.perf_counter() - start), stats.generated_tokens


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="smollm2")
    ap.add_argument("--batches", type=int, nargs="+", default=[1, 8, 32])
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--vllm-url", default="")
    ap.add_argument("--vllm-python", default="")
    args = ap.parse_args()
    cfg = load_config("recipes/calculator.yaml", [f"model.name={args.model}"])
    model, tokenizer = load_model(args.model, device="cpu")
    spec = get_env(cfg.env.name)
    with tempfile.TemporaryDirectory() as tmp:
        path = save_checkpoint(model, tokenizer, Path(tmp) / "policy")
        proc, url = start_server(serve_command(path, cfg.model.precision, "cpu"), Path(tmp) / "server.log")
        engines = {"embedded": HFEngine(model, tokenizer, cfg.model.precision),
                   "served (agentic-rl serve)": ServedEngine(url, tokenizer)}
        servers = [proc]
        if args.vllm_python:
            vproc, args.vllm_url = start_server(vllm_command(path, cfg.model.precision, args.vllm_python),
                                                Path(tmp) / "vllm.log")
            servers.append(vproc)
        if args.vllm_url:
            engines["vllm"] = ServedEngine(args.vllm_url, tokenizer)
        best: dict[str, dict[int, float]] = {name: {} for name in engines}
        try:
            for batch in args.batches:
                for _ in range(args.repeats):
                    for name, engine in engines.items():
                        rate, _ = tokens_per_s(engine, tokenizer, spec, cfg, batch)
                        best[name][batch] = max(best[name].get(batch, 0.0), rate)
        finally:
            for server in servers:
                stop_server(server)
    yardstick = "vllm" if args.vllm_url else "embedded"
    table = {name: {b: {"tokens_per_s": round(r, 1), f"ratio_to_{yardstick}": round(r / best[yardstick][b], 3)}
                    for b, r in rates.items()} for name, rates in best.items()}
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    RESULTS.write_text(json.dumps({"model": args.model, "threads": torch.get_num_threads(), "repeats": args.repeats,
                                   "date": time.strftime("%Y-%m-%d"), "commit": commit, "engines": table}, indent=2))
    print(f"| engine | batch | tokens/s | ratio to {yardstick} |\n|---|---|---|---|")
    for name, rows in table.items():
        for b, row in rows.items():
            print(f"| {name} | {b} | {row['tokens_per_s']} | {row[f'ratio_to_{yardstick}']} |")


if __name__ == "__main__":
    main()
