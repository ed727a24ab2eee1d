"""One GRPO step against episode length and group size: wall time, sampled and trained tokens/s, peak
memory; TRL's GRPOTrainer side by side where it can run the same episodes.

    python benchmarks/bench_scaling.py --quick          # the tiny model, seconds a point (CI-sized)
    python benchmarks/bench_scaling.py                  # SmolLM2-135M: turns 2 -> 32, tokens 1k -> 16k, G 4 and 8,
                                                        # and TRL (benchmarks/trl_harness, .venv-trl) at G 8
    python benchmarks/bench_scaling.py --no-trl         # ours only

An episode here runs all its turns: the env (`LongEnv`, the calculator harness's prompt) answers every
action with a tool result until `rollout.max_turns`, and each action samples up to tokens / turns
tokens with no stop string (an end-of-sequence token still ends an action early: the tokens actually
sampled are reported). The step is one rollout of `--tasks` tasks x G episodes and one update
(`rl_update`), with the recipe fitted to the machine's memory as a run is (`models/memory.py`'s
plan_memory: checkpointing, token-bounded micro-batches, fewer episodes decoding at once); the JSON
names the plan of each point. Past the model's context (SmolLM2: 8,192) the point runs with
`model.rope_scaling: {rope_type: yarn, factor: 2}`.

Each point runs in a process of its own, one after the other (2 cores), so its peak resident size
(ru_maxrss) is its own: memory is reported as the growth of the peak over the process's size once the
model is loaded (as benchmarks/bench_memory.py reads the resident size).

TRL: `benchmarks/trl_harness/grpo_calculator.py` with max_completion_length = tokens and
max_tool_calling_iterations = turns - 1, its fixed 4 prompts x 8 generations. What it cannot run:
its tool loop ends an episode at the first reply without a tool call, so its episodes are as long as
the model makes them, not as the point asks (its sampled tokens are reported; compare tokens/s);
its budget counts the tool results' tokens too; no group size but 8 in the harness; no position
scaling past the context. Results go to benchmarks/results/scaling.json (or --out) and a plot beside
it (scaling.png).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TRL_DIR = ROOT / "benchmarks" / "trl_harness"
TRL_PYTHON = ROOT / ".venv-trl" / "bin" / "python"
RESULTS = ROOT / "benchmarks" / "results" / "scaling.json"
QUICK = {"model": "tiny", "points": [(2, 64), (4, 128), (8, 256)], "groups": (2, 4), "tasks": 1}
FULL = {"model": "smollm2", "points": [(2, 1024), (4, 2048), (8, 4096), (16, 8192), (32, 16384)],
        "groups": (4, 8), "tasks": 2}


@dataclass(frozen=True, kw_only=True)
class Point:
    model: str
    turns: int
    tokens: int  # generated tokens an episode, all turns
    group: int
    tasks: int


class LongEnv:
    """The calculator harness's prompt and tool; every action gets a tool result, so the episode runs
    to the rollout's turn limit."""

    def __init__(self):
        sys.path.insert(0, str(TRL_DIR))
        from bench_grpo_step import harness_env

        from agentic_rl.envs.base import ToolEnv

        self._env: ToolEnv = harness_env()
        self.format, self.tool_schemas = self._env.format, self._env.tool_schemas

    def reset(self, task):
        return self._env.reset(task)

    def step(self, action: str):
        from agentic_rl.envs.base import StepResult

        return StepResult(observation=({"role": "tool", "name": "calculator", "content": "42. Go on."},),
                          reward=float(len(action) % 2))  # a spread of rewards: every group has signal


def run_point(p: Point) -> dict:
    """One GRPO step of `p` in this process: the rollout, the update, their seconds and tokens."""
    import torch

    from agentic_rl.engines.base import SamplingParams
    from agentic_rl.engines.hf import HFEngine
    from agentic_rl.models.loader import load_model
    from agentic_rl.models.memory import peak_rss_gb, rss_gb
    from agentic_rl.rollout.loop import Budget, rollout
    from agentic_rl.trainer.config import load_config
    from agentic_rl.trainer.credit import compute_credit
    from agentic_rl.trainer.loss_terms import build_loss
    from agentic_rl.trainer.rl_loop import fit_memory
    from agentic_rl.trainer.update import UpdateBatch, rl_update
    from agentic_rl.types import RolloutBatch, Task

    torch.set_num_threads(2)
    per_turn = p.tokens // p.turns
    sets = [f"model.name={p.model}", "model.precision=auto", f"rl.tasks.group_size={p.group}",
            f"rl.tasks.per_step={p.tasks}", f"rollout.max_turns={p.turns}", f"rollout.max_new_tokens={per_turn}",
            f"rollout.max_episode_tokens={p.tokens}", "rl.optim.lr=1e-6"]
    context = 4096 if p.model == "tiny" else 8192
    prompt_guess = 400
    rope = {"rope_type": "yarn", "factor": 2.0} if p.tokens + 48 * p.turns + prompt_guess > context else {}
    model, tokenizer = load_model(p.model, rope_scaling=rope)
    base_gb = rss_gb()
    env = LongEnv()
    prompt = len(tokenizer.encode(env.format.render_prompt(env.reset(Task("0", "What is 6 x 7?")), env.tool_schemas)))
    cfg, memory = fit_memory(load_config(None, sets), model, prompt)
    engine = HFEngine(model, tokenizer, cfg.model.precision)
    optimizer = torch.optim.AdamW([q for q in model.parameters() if q.requires_grad], lr=1e-6, weight_decay=0.0)
    params = SamplingParams(1.0, 1.0, per_turn, ())
    budget = Budget(p.turns, per_turn, p.tokens, max_concurrent=cfg.rollout.max_concurrent)
    tasks = [Task(str(i), f"What is {i + 6} x 7?", str((i + 6) * 7)) for i in range(p.tasks)]
    t0 = time.perf_counter()
    groups, stats = rollout(engine, LongEnv, tasks, p.group, params, budget, seed=0)
    rollout_s = time.perf_counter() - t0
    batch = UpdateBatch(RolloutBatch(tuple(groups), engine.version), compute_credit(groups, cfg.rl.algorithm))
    metrics = rl_update(model, optimizer, batch, build_loss(cfg, model), cfg.rl.optim, tokenizer.pad_token_id).metrics
    wall = time.perf_counter() - t0
    trained = sum(sum(t.loss_mask()) for g in groups for t in g.trajectories)
    tokens = sum(len(t.token_ids()) for g in groups for t in g.trajectories)
    return {"framework": "agentic-rl", "model": p.model, "turns": p.turns, "tokens": p.tokens, "group": p.group,
            "episodes": p.tasks * p.group, "wall_s": round(wall, 2), "rollout_s": round(rollout_s, 2),
            "train_s": round(metrics["time_train_s"], 2), "sampled_tokens": stats.generated_tokens,
            "trained_tokens": trained, "row_tokens_max": max(len(t.token_ids()) for g in groups for t in g.trajectories),
            "tokens_total": tokens, "sampled_tokens_per_s": round(stats.generated_tokens / rollout_s, 1),
            "trained_tokens_per_s": round(trained / metrics["time_train_s"], 1),
            "peak_rss_growth_gb": round(peak_rss_gb() - base_gb, 3), "estimate_gb": memory["mem_estimate_gb"],
            "plan": memory.get("mem_plan", {}), "rope_scaling": rope}


def run_trl(python: str, p: Point, out: Path) -> dict:
    """TRL's step at `p`'s caps (see the module's docstring for what differs)."""
    cmd = [python, str(TRL_DIR / "grpo_calculator.py"), "--steps", "2", "--out", str(out),
           "--max-completion-length", str(p.tokens), "--max-tool-calling-iterations", str(p.turns - 1)]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    if proc.returncode != 0:
        return {"framework": "trl", "turns": p.turns, "tokens": p.tokens, "group": 8, "error": proc.stderr[-400:]}
    r = json.loads(out.read_text())
    last = r["per_step"][-1]
    return {"framework": "trl", "turns": p.turns, "tokens": p.tokens, "group": 8, "wall_s": last["wall_s"],
            "sampled_tokens": last["completion_tokens"], "process_s": round(time.perf_counter() - t0, 1),
            "sampled_tokens_per_s": round(last["completion_tokens"] / last["wall_s"], 1)}


def in_process(p: Point) -> dict:
    """`run_point` in a fresh process (its own peak resident size)."""
    cmd = [sys.executable, __file__, "--point", json.dumps(p.__dict__)]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env={"PYTHONPATH": str(ROOT),
                                                                              "OMP_NUM_THREADS": "2"})
    if proc.returncode != 0:
        return {**p.__dict__, "framework": "agentic-rl", "error": proc.stderr[-600:]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(14, 4))
    for (framework, group), style in zip(sorted({(r["framework"], r["group"]) for r in rows if "error" not in r}),
                                         ("o-", "s-", "^--", "v--")):
        mine = sorted((r for r in rows if (r["framework"], r["group"]) == (framework, group) and "error" not in r),
                      key=lambda r: r["tokens"])
        label = f"{framework} G={group}"
        x = [r["tokens"] for r in mine]
        axes[0].plot(x, [r["wall_s"] for r in mine], style, label=label)
        axes[1].plot(x, [r["sampled_tokens_per_s"] for r in mine], style, label=label)
        if framework == "agentic-rl":
            axes[2].plot(x, [r["peak_rss_growth_gb"] for r in mine], style, label=label)
    for ax, title in zip(axes, ("wall s / GRPO step", "sampled tokens / s", "peak RSS growth (GiB)")):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("generated tokens per episode (turns = tokens / 512 at 1k+)")
        ax.set_title(title)
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="the tiny model, small points (a minute)")
    ap.add_argument("--no-trl", action="store_true")
    ap.add_argument("--trl-python", default=str(TRL_PYTHON))
    ap.add_argument("--out", default=str(RESULTS))
    ap.add_argument("--point", help=argparse.SUPPRESS)  # one point, in this process (see in_process)
    args = ap.parse_args()
    if args.point:
        print(json.dumps(run_point(Point(**json.loads(args.point)))))
        return
    grid = QUICK if args.quick else FULL
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    rows = []
    for turns, tokens in grid["points"]:
        for group in grid["groups"]:
            rows.append(in_process(Point(model=grid["model"], turns=turns, tokens=tokens, group=group,
                                         tasks=grid["tasks"])))
            print(json.dumps(rows[-1]), flush=True)
        if not (args.quick or args.no_trl) and tokens <= 8192:  # TRL: no position scaling past the context
            rows.append(run_trl(args.trl_python, Point(model="smollm2", turns=turns, tokens=tokens, group=8, tasks=4),
                                out.with_name("trl_scaling_point.json")))
            print(json.dumps(rows[-1]), flush=True)
    out.write_text(json.dumps({"mode": "quick" if args.quick else "full", "date": time.strftime("%Y-%m-%d"),
                               "rows": rows}, indent=2))
    plot(rows, out.with_suffix(".png"))
    print(f"wrote {out} and {out.with_suffix('.png')}")


if __name__ == "__main__":
    main()
