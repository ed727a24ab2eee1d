"""Agent episodes per second through the recording proxy at 1, 8 and 32 concurrent agents:

    python benchmarks/bench_agent_concurrency.py [--model tiny | smollm2] [--concurrency 1 8 32]
        [--episodes 32] [--repeats 1] [--agent examples/openai_calculator_agent.py:run]
        [--vllm-python .venv-vllm/bin/python | --vllm-url URL] [--engines embedded,served,vllm]

The agent (by default the shipped example, a plain `openai` SDK program with function calling)
runs `--episodes` episodes of the env's training tasks (one a task) through the proxy the trainer
starts (`rollout/agents.py`, the recipe's sampling and budgets), `--concurrency` of them at once,
over each engine in turn: `embedded` (this process), `served` (`agentic-rl serve` in a child
process, through the served engine) and vLLM with `--vllm-python` (started as
`rollout.engine.name: managed_vllm` starts it) or `--vllm-url`. `--model tiny` is the tiny random
model on the tiny recipe (a quick check that everything runs; its figures say nothing of a real
model), `--model smollm2` the proxy recipe's (recipes/proxy_calculator.yaml). Each cell is the best
of `--repeats`, after one warm-up episode per engine; `--engines` names the ones to measure (all
that are set up, by default). Reports episodes/s, model calls/s and
generated tokens/s; writes benchmarks/results/agent_concurrency_{model}.json (or `--out`).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
import time
from pathlib import Path

import torch

from agentic_rl.engines.hf import HFEngine
from agentic_rl.engines.managed import serve_command, start_server, stop_server, vllm_command
from agentic_rl.engines.served import ServedEngine
from agentic_rl.envs.registry import get_env
from agentic_rl.models.checkpoint import save_checkpoint
from agentic_rl.models.loader import load_model
from agentic_rl.registry import load_callable
from agentic_rl.rollout.agents import AgentRollouts
from agentic_rl.trainer.config import load_config
from agentic_rl.trainer.episodes import episodes

RESULTS = Path(__file__).resolve().parent / "results"
RECIPES = {"tiny": "recipes/tiny.yaml", "smollm2": "recipes/proxy_calculator.yaml"}


def measure(agent, engine, tokenizer, cfg, tasks, concurrency: int) -> dict[str, float]:
    """One rollout of `tasks` (one episode each) at `concurrency`: its rates."""
    spec = get_env(cfg.env.name)
    backend = AgentRollouts(agent, engine, tokenizer, episodes(spec, cfg.env.options, cfg.rollout),
                            cfg.rollout.agent.timeout_s, concurrency)
    try:
        start = time.perf_counter()
        groups, stats = backend.rollout(tasks, 1, seed=concurrency)
        seconds = time.perf_counter() - start
    finally:
        backend.close()
    done = [t for g in groups for t in g.trajectories]
    failed = sum(t.infra_failure is not None for t in done)
    calls = sum(len(t.turns) for t in done)
    return {"seconds": round(seconds, 3), "episodes_per_s": round(len(done) / seconds, 3),
            "calls_per_s": round(calls / seconds, 2), "tokens_per_s": round(stats.generated_tokens / seconds, 1),
            "infra_failures": failed}


def engines(args, model, tokenizer, cfg, tmp: Path) -> tuple[dict, list]:
    """The engines to measure (`args.engines`), and the servers started for them."""
    path = save_checkpoint(model, tokenizer, tmp / "policy")
    out, servers = {}, []
    if "embedded" in args.engines:
        out["embedded"] = HFEngine(model, tokenizer, cfg.model.precision)
    if "served" in args.engines:
        proc, url = start_server(serve_command(path, cfg.model.precision, "cpu"), tmp / "server.log")
        out["served (agentic-rl serve)"] = ServedEngine(url, tokenizer, model)
        servers.append(proc)
    if "vllm" not in args.engines:
        return out, servers
    if args.vllm_python:
        vproc, args.vllm_url = start_server(vllm_command(path, cfg.model.precision, args.vllm_python), tmp / "vllm.log")
        servers.append(vproc)
    if args.vllm_url:
        out["vllm"] = ServedEngine(args.vllm_url, tokenizer, model)
    return out, servers


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="tiny", choices=sorted(RECIPES))
    ap.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 32])
    ap.add_argument("--episodes", type=int, default=32)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--agent", default="examples/openai_calculator_agent.py:run")
    ap.add_argument("--vllm-url", default="")
    ap.add_argument("--vllm-python", default="")
    ap.add_argument("--engines", default="embedded,served,vllm", help="comma-separated: embedded, served, vllm")
    ap.add_argument("--out", type=Path, default=None, help="default: benchmarks/results/agent_concurrency_MODEL.json")
    args = ap.parse_args()
    args.engines = set(args.engines.split(","))
    cfg = load_config(RECIPES[args.model], [f"model.name={args.model}"])
    torch.set_num_threads(max(1, int(os.environ.get("OMP_NUM_THREADS", torch.get_num_threads()))))
    model, tokenizer = load_model(args.model, device="cpu")
    agent = load_callable(args.agent)
    tasks = get_env(cfg.env.name).tasks("train", args.episodes, 0)
    table: dict[str, dict[int, dict]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        chosen, servers = engines(args, model, tokenizer, cfg, Path(tmp))
        try:
            for name, engine in chosen.items():
                measure(agent, engine, tokenizer, cfg, tasks[:1], 1)  # warm-up
                table[name] = {}
                for c in args.concurrency:
                    runs = [measure(agent, engine, tokenizer, cfg, tasks, c) for _ in range(args.repeats)]
                    table[name][c] = max(runs, key=lambda r: r["episodes_per_s"])
                    print(name, c, table[name][c], flush=True)
        finally:
            for server in servers:
                stop_server(server)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    out = args.out or RESULTS / f"agent_concurrency_{args.model}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"model": args.model, "recipe": RECIPES[args.model], "agent": args.agent,
                               "episodes": args.episodes, "repeats": args.repeats, "threads": torch.get_num_threads(),
                               "date": time.strftime("%Y-%m-%d"), "commit": commit, "engines": table}, indent=2))
    print("| engine | concurrent agents | episodes/s | calls/s | tokens/s |\n|---|---|---|---|---|")
    for name, rows in table.items():
        for c, r in rows.items():
            print(f"| {name} | {c} | {r['episodes_per_s']} | {r['calls_per_s']} | {r['tokens_per_s']} |")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
