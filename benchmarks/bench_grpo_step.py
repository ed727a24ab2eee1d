"""Seconds per GRPO step, side by side with TRL's GRPOTrainer, on the same task, model and settings.

Settings (those of benchmarks/trl_harness/grpo_calculator.py): SmolLM2-135M-Instruct, full fine-tune,
4 tasks x 8 samples per step, at most 128 generated tokens per episode, 2 tool iterations (3
assistant turns), temperature 1.0, lr 1e-6, no KL, token-mean loss, group-scaled advantages, the same
two-example tool prompt and the same train tasks and reward. Both runs go in one invocation, one after
the other (never concurrently: 2 cores), and the ratio is reported.

    bash benchmarks/trl_harness/setup_venv.sh                          # TRL's own venv, .venv-trl (idempotent)
    python benchmarks/bench_grpo_step.py                       # TRL (in .venv-trl) + ours
    python benchmarks/bench_grpo_step.py --trl-python PY       # TRL in another venv with trl
    python benchmarks/bench_grpo_step.py --trl-json FILE       # reuse a TRL result from this machine

The TRL side (benchmarks/trl_harness/grpo_calculator.py) runs in its own venv, kept apart from ours, with the
versions of the reference run pinned by benchmarks/trl_harness/setup_venv.sh (trl 1.16.0, transformers 5.23.0).
The prompt, tool, train tasks and reward come from benchmarks/trl_harness/common.py and tasks.py, which both
sides import, so both runs see the same tokens.

One difference we keep: TRL's 128-token budget also counts tool-response tokens; ours counts only
the tokens the policy generates. Completion tokens/s normalizes for it.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TRL_DIR = ROOT / "benchmarks" / "trl_harness"
TRL_PYTHON = ROOT / ".venv-trl" / "bin" / "python"
sys.path.insert(0, str(TRL_DIR))

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
from agentic_rl.trainer.credit import compute_credit  # noqa: E402
from agentic_rl.trainer.loss_terms import build_loss  # noqa: E402
from agentic_rl.trainer.update import UpdateBatch, rl_update  # noqa: E402
from agentic_rl.types import RolloutBatch, Task  # noqa: E402

TASKS_PER_STEP, GROUP = 4, 8


def run_trl(python: str, steps: int, out: Path) -> dict:
    if shutil.which(python) is None:
        sys.exit(f"no TRL python at {python}: run `bash benchmarks/trl_harness/setup_venv.sh` (or pass --trl-python)")
    cmd = [python, str(TRL_DIR / "grpo_calculator.py"), "--steps", str(steps), "--out", str(out)]
    print("running TRL:", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
    return json.loads(out.read_text())


def harness_env() -> ToolEnv:
    system, *fewshot = trl_common.prompt_messages("?", "tools", fewshot=True)[:-1]
    return ToolEnv([trl_tasks.calculator], system["content"], fewshot=fewshot)


def correct(task: Task, trajectory) -> Score:
    value = trl_tasks.correct(trajectory.final_text, task.answer)
    return Score(value, {"correct": value})


def run_ours(steps: int, precision: str) -> dict:
    cfg = load_config(None, [
        "model.name=smollm2", f"model.precision={precision}", "rl.optim.lr=1e-6", f"rl.tasks.group_size={GROUP}",
        f"rl.tasks.per_step={TASKS_PER_STEP}", "rl.algorithm.aggregation=token-mean", "rl.algorithm.kl_coef=0",
        "rollout.temperature=1.0", "rollout.max_turns=3", "rollout.max_new_tokens=128",
        "rollout.max_episode_tokens=128"])
    model, tokenizer = load_model("smollm2")
    engine = HFEngine(model, tokenizer, precision)
    import torch

    optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.rl.optim.lr, weight_decay=0.0)
    params = SamplingParams(1.0, 1.0, 128, ("</tool_call>",))
    budget = Budget(max_turns=3, max_new_tokens=128, max_episode_tokens=128, step_timeout_s=60.0)
    train = [Task(t["id"], t["question"], t["answer"]) for t in trl_tasks.train_tasks(TASKS_PER_STEP * steps)]
    per_step = []
    for step in range(steps):
        t0 = time.perf_counter()
        batch = train[step * TASKS_PER_STEP : (step + 1) * TASKS_PER_STEP]
        groups, stats = rollout(engine, harness_env, batch, GROUP, params, budget, seed=step)
        groups = score_groups(correct, groups)
        m = rollout_metrics(groups)
        batch = UpdateBatch(RolloutBatch(tuple(groups), engine.version), compute_credit(groups, cfg.rl.algorithm))
        train_m = rl_update(model, optimizer, batch, build_loss(cfg, model), cfg.rl.optim,
                            tokenizer.pad_token_id).metrics
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
    ap.add_argument("--trl-python", default=str(TRL_PYTHON), help="python of a venv with trl (.venv-trl)")
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
