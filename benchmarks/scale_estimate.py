"""An ESTIMATE of how one RL step of the main job (recipes/calculator.yaml) would divide into rollout /
update / weight sync for a 1.5B and a 7B policy, on this CPU and on one H100, from costs of our own code
paths measured here at three SmolLM2 sizes and extrapolated by parameter count.

    python benchmarks/scale_estimate.py [--sizes 135M,360M,1.7B] [--threads 2] [--new-tokens 64] [--reps 2]
                                        [--out benchmarks/results/scale_estimate.json] [--reanalyse OLD.json
                                        [--remeasure 1.7B]]

Each size runs in a process of its own (its peak RSS is its own): a random-initialised Llama of SmolLM2's
published shape (no download), the packaged SmolLM2 tokenizer, the dtypes `model.precision: auto` picks
(fp32 weights; a bf16 sampler copy and bf16 autocast where bf16 measures faster, `models/precision.py`).

  decode  `rollout()` on the embedded HFEngine of calculator_compound episodes at the recipe's temperature
          and stop strings, per_step x group_size rows and one group's rows, each with actions of 8 and of
          --new-tokens tokens: a decode step (fixed + per row) from the differences, the prefill from the rest
  update  `rl_update`, SGD as its optimizer (no state: 1.7B fits) less SGD's own step, on a step shaped like
          the recipe's (the per_step x variance_keep groups it trains, each group_size copies of a task's
          demonstration: real prompt, tool call, observation; the run's mean hindsight corrections) where it
          fits, and on one group alone at every size: seconds per forwarded token. AdamW's step (the
          trainer's `rl_loop._optimizer`) alone where its moments fit, else extrapolated
  sync    `HFEngine.sync_weights()` (the fp32 -> bf16 copy) and the probe `checked_sync` runs after it

Token counts of a step are the means over the RL steps of benchmarks/results/workers_2026-11-28/workers0
(the main job, 135M, this CPU type). The model of a step at 135M is printed against that run's measured
split, then each cost is fitted as fixed + per parameter and extrapolated to Qwen2.5-1.5B / -7B shapes.
Writes --out (raw measurements, fits, assumptions, tables) and prints the tables as Markdown;
--reanalyse redoes the fits and tables of an earlier --out without measuring (--remeasure: those sizes
measured again). This file measures; the model of a step (shapes, assumptions, fits, tables) is
`scale_model.py`.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import torch
from scale_model import (
    ACT_FACTOR,
    GB,
    GPU,
    RECIPE,
    ROOT,
    SHORT_TOKENS,
    SIZES,
    STEP,
    analyse,
    markdown,
    param_counts,
    run_stats,
)
from transformers import AutoModelForCausalLM, LlamaConfig

from agentic_rl.data.curriculum import make_sampler
from agentic_rl.engines.hf import HFEngine
from agentic_rl.engines.probe import SyncProbe
from agentic_rl.envs.registry import get_env
from agentic_rl.models.loader import load_tokenizer
from agentic_rl.models.memory import available_bytes
from agentic_rl.rollout.demos import demonstrate
from agentic_rl.rollout.loop import Budget, rollout
from agentic_rl.trainer.config import load_config
from agentic_rl.trainer.credit import Credit
from agentic_rl.trainer.episodes import episodes
from agentic_rl.trainer.loss_terms import build_loss
from agentic_rl.trainer.rl_loop import _optimizer, rl_pool
from agentic_rl.trainer.update import UpdateBatch, rl_update
from agentic_rl.types import RolloutBatch, TrajectoryGroup


# ---------------------------------------------------------------- models and memory
def build_model(size: str, tokenizer):
    ids = {k: getattr(tokenizer, k) for k in ("bos_token_id", "eos_token_id", "pad_token_id")}
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(LlamaConfig(**{**SIZES[size].to_dict(), **ids}), dtype=torch.float32)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model.eval()


def rss_gb(field: str = "VmHWM") -> float:
    lines = Path("/proc/self/status").read_text().splitlines()
    return next((int(ln.split()[1]) / 2**20 for ln in lines if ln.startswith(field + ":")), math.nan)


def reset_peak() -> None:
    try:
        Path("/proc/self/clear_refs").write_text("5")  # Linux: VmHWM restarts from the current RSS
    except OSError:
        pass


def fits_in_memory(need_bytes: float) -> tuple[bool, float]:
    avail = available_bytes() or math.inf
    return need_bytes < 0.9 * avail, avail / GB


@contextmanager
def counted(model):
    """Positions fed to `model` inside: "prefill" in forwards wider than one token, "decode" in the rest."""
    seen = {"prefill": 0, "decode": 0}

    def hook(module, args):
        seen["prefill" if args[0].shape[-1] > 1 else "decode"] += args[0].numel()

    handle = model.get_input_embeddings().register_forward_pre_hook(hook)
    try:
        yield seen
    finally:
        handle.remove()


def best_seconds(fn, reps: int) -> float:
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


# ---------------------------------------------------------------- measurements (one size, in a worker)
def recipe_tasks(spec, cfg, n: int):
    rl = cfg.rl
    return make_sampler(rl.tasks.sampler, rl_pool(spec, rl.tasks, rl.steps, rl.seed), seed=rl.seed).sample(n)


def measure_decode(engine, tokenizer, spec, cfg, new_tokens: int) -> dict:
    """A decode step at the whole batch (per_step tasks) and at one group: fixed + per-row seconds."""
    ep, G = episodes(spec, cfg.env.options, cfg.rollout), cfg.rl.tasks.group_size
    tasks = recipe_tasks(spec, cfg, cfg.rl.tasks.per_step)

    def timed(k: int, n: int) -> dict:
        params, budget = replace(ep.params, max_new_tokens=n), Budget(1, n, n, cfg.rollout.step_timeout_s)
        with counted(engine._infer) as fed:
            t0 = time.perf_counter()
            _, stats = rollout(engine, ep.make_env, tasks[:k], G, params, budget, seed=0)
        return {"rows": k * G, "new_tokens": n, "seconds": time.perf_counter() - t0,
                "tokens": stats.generated_tokens, **fed}

    timed(len(tasks), SHORT_TOKENS)  # warm-up
    runs = [timed(k, n) for k in (len(tasks), 1) for n in (SHORT_TOKENS, new_tokens)]
    per_token = [(b["seconds"] - a["seconds"]) / max(b["tokens"] - a["tokens"], 1) for a, b in (runs[:2], runs[2:])]
    (R, s_R), (r, s_r) = [(x["rows"], t * x["rows"]) for x, t in zip(runs[::2], per_token)]
    per_row = (s_R - s_r) / (R - r)
    prefill_s = max(runs[0]["seconds"] - runs[0]["tokens"] * per_token[0], 1e-9)
    return {"runs": runs, "rows": R, "s_per_step": s_R, "tokens_per_s": 1 / per_token[0],
            "s_per_step_one_group": s_r, "step_fixed_s": max(s_r - r * per_row, 0.0), "step_s_per_row": per_row,
            "prefill_s": prefill_s, "prefill_tokens": runs[0]["prefill"],
            "prefill_s_per_token": prefill_s / max(runs[0]["prefill"], 1)}


def measure_sync(engine, model, tokenizer, cfg) -> dict:
    copy_s = best_seconds(engine.sync_weights, 3)
    probe = SyncProbe.build(engine, tokenizer, cfg.model.precision, cfg.rollout.engine.sync_probe_tol)
    t0 = time.perf_counter()
    gap = probe.gap(engine, model)  # the work of `checked_sync`'s probe (check() only compares the gap)
    probe_s = time.perf_counter() - t0
    gb = sum(p.numel() * p.element_size() for p in engine._infer.parameters()) / GB
    return {"copy_s": copy_s, "sampler_gb": gb, "s_per_gb": copy_s / gb, "probe_s": probe_s, "probe_gap": gap,
            "probe_prompt_tokens": len(probe.prompt)}


def synthetic_step(spec, cfg, tokenizer, corrections: int):
    """The groups the recipe trains (the variance_keep share of per_step), each group_size copies of a
    task's demonstration with advantages of random sign, and `corrections` other demonstrations."""
    rl, G = cfg.rl, cfg.rl.tasks.group_size
    n_groups = max(1, round(rl.tasks.per_step * rl.filters.variance_keep))
    tasks = recipe_tasks(spec, cfg, n_groups + corrections)
    demos = [demonstrate(spec, cfg.env.options, t, tokenizer)[1] for t in tasks]
    gen, groups, advantages = torch.Generator().manual_seed(0), [], []
    for d in demos[:n_groups]:
        groups.append(TrajectoryGroup(d.task, (d,) * G))
        for sign in (torch.rand(G, generator=gen) < 0.5).float() * 2 - 1:
            advantages.append(torch.tensor(d.loss_mask(), dtype=torch.float32) * sign)
    obs = [len(t.obs_ids) for d in demos for t in d.turns[1:]]
    shape = {"obs_tokens_per_call": statistics.mean(obs) if obs else 0.0,
             "prompt_tokens": statistics.mean(len(d.turns[0].obs_ids) for d in demos),
             "row_tokens": max(len(d.token_ids()) for d in demos)}
    return groups, advantages, tuple(demos[n_groups:]), shape


def measure_update(model, cfg, step, pad_id: int, reps: int) -> dict:
    """The whole step where it fits (the shared prompt and a micro-batch each hold autocast's bf16 casts,
    2P, beside the grads, 4P), and one group alone (one micro-batch) of as many rows as fit."""
    groups, advantages, fixes, shape = step
    c, P, G = model.config, sum(p.numel() for p in model.parameters()), len(groups[0].trajectories)
    act = lambda tokens: ACT_FACTOR * tokens * c.num_hidden_layers * 34 * c.hidden_size * 2  # noqa: E731
    own, prompt = shape["row_tokens"] - shape["prompt_tokens"], shape["prompt_tokens"]
    need = 8 * P + act(2 * prompt + G * own)
    ok, avail = fits_in_memory(need)
    out = ({"full": _time_update(model, cfg, groups, advantages, fixes, pad_id, reps)} if ok
           else {"full_skipped": f"needs ~{need / GB:.1f} GB, {avail:.1f} GB available"})
    for rows in (G, G // 2, 2):
        if fits_in_memory(max(2 * P + act(prompt + rows * own), 6 * P) + GB / 2)[0]:
            one = [TrajectoryGroup(groups[0].task, groups[0].trajectories[:rows])]
            return {**out, "one_group": _time_update(model, cfg, one, advantages[:rows], (), pad_id, reps)}
    return {**out, "one_group_skipped": f"2 rows need more than the {avail:.1f} GB available"}


def _time_update(model, cfg, groups, advantages, fixes, pad_id: int, reps: int) -> dict:
    optim = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=cfg.rl.optim.lr)
    batch = UpdateBatch(RolloutBatch(tuple(groups)), Credit(list(advantages)), fixes)
    loss, runs = build_loss(cfg, model), []
    for _ in range(reps):
        with counted(model) as fed:
            m = rl_update(model, optim, batch, loss, cfg.rl.optim, pad_id).metrics
        runs.append({"seconds": m["time_train_s"], "trained_tokens": m["trained_tokens"],
                     "forwarded_tokens": fed["prefill"] + fed["decode"], "corrections": len(fixes),
                     "rows": sum(len(g.trajectories) for g in groups)})
    return {**min(runs, key=lambda r: r["seconds"]), "all_seconds": [r["seconds"] for r in runs]}


def measure_optimizers(model, cfg, reps: int = 3) -> dict:
    """One SGD step (taken out of the update's time) and one AdamW step (`rl_loop._optimizer`, the trainer's)
    where its moments fit; the first step, which allocates them, is not timed."""
    params = [p for p in model.parameters() if p.requires_grad]
    for p in params:
        p.grad = torch.randn_like(p) * 1e-3
    sgd = torch.optim.SGD(params, lr=cfg.rl.optim.lr)
    out = {"sgd_s": best_seconds(sgd.step, reps)}
    ok, avail = fits_in_memory(8 * sum(p.numel() for p in params) + GB / 2)
    if ok:
        adamw = _optimizer(model, None, cfg.rl.optim.lr, cfg.rl.critic.lr)
        adamw.step()
        out["adamw_s"] = best_seconds(adamw.step, reps)
    else:
        out["adamw_skipped"] = f"moments need {8 * sum(p.numel() for p in params) / GB:.1f} GB, {avail:.1f} available"
    for p in params:
        p.grad = None
    return out


def worker(size: str, args) -> dict:
    torch.set_num_threads(args.threads)
    cfg, tokenizer = load_config(RECIPE, ["log.progress=false"]), load_tokenizer("smollm2")
    spec, rss, t0 = get_env(cfg.env.name), {}, time.perf_counter()
    model = build_model(size, tokenizer)
    out = {"size": size, "build_s": time.perf_counter() - t0, "params": param_counts(model.config)}
    rss["model"] = rss_gb("VmRSS")
    reset_peak()
    engine = HFEngine(model, tokenizer, cfg.model.precision)
    out["sampler_dtype"] = str(engine.dtype)
    print(f"[{size}] decode and sync ...", file=sys.stderr, flush=True)
    out["decode"] = measure_decode(engine, tokenizer, spec, cfg, args.new_tokens)
    out["sync"] = measure_sync(engine, model, tokenizer, cfg)
    rss["decode+sync_peak"] = rss_gb()
    del engine
    gc.collect()
    reset_peak()
    step = synthetic_step(spec, cfg, tokenizer, args.corrections)
    out["shape"] = step[3]
    print(f"[{size}] update ...", file=sys.stderr, flush=True)
    out["update"] = measure_update(model, cfg, step, tokenizer.pad_token_id, args.reps)
    rss["update_peak"] = rss_gb()
    reset_peak()
    out["optimizer"] = measure_optimizers(model, cfg)
    rss["optimizer_peak"] = rss_gb()
    return {**out, "rss_gb": rss}


def spawn(size: str, args, corrections: int) -> dict:
    """One size measured in a process of its own: its JSON, or the error."""
    cmd = [sys.executable, __file__, "--worker", size, "--threads", str(args.threads), "--new-tokens",
           str(args.new_tokens), "--reps", str(args.reps), "--corrections", str(corrections)]
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        t0 = time.perf_counter()
        rc = subprocess.run([*cmd, "--worker-out", f.name]).returncode
        if rc:
            return {"error": f"worker exited {rc}"}
        return {**json.loads(Path(f.name).read_text()), "wall_s": time.perf_counter() - t0}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default=",".join(SIZES))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--new-tokens", type=int, default=64, help="tokens a row in the long decode runs")
    ap.add_argument("--reps", type=int, default=2, help="rl_update repetitions (the fastest counts)")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "scale_estimate.json")
    ap.add_argument("--reanalyse", type=Path, help="an earlier --out: fits and tables again, nothing measured")
    ap.add_argument("--remeasure", default="", help="with --reanalyse: these sizes measured again, the rest kept")
    ap.add_argument("--worker", choices=list(SIZES), help=argparse.SUPPRESS)
    ap.add_argument("--worker-out", help=argparse.SUPPRESS)
    ap.add_argument("--corrections", type=int, default=0, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        Path(args.worker_out).write_text(json.dumps(worker(args.worker, args)))
        return
    run = run_stats(load_config(RECIPE, ["log.progress=false"]))
    again = args.remeasure.split(",") if args.remeasure else [] if args.reanalyse else args.sizes.split(",")
    measured = json.loads(args.reanalyse.read_text())["measured"] if args.reanalyse else {}
    measured.update({s: spawn(s, args, round(run["hindsight_verified"])) for s in again})
    cpu = next((ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines()
                if ln.startswith("model name")), "unknown")
    report = {"machine": {"cpu": cpu, "threads": args.threads, "new_tokens": args.new_tokens, "reps": args.reps},
              "measured": measured, "assumptions": {"gpu": GPU, "step": STEP}, **analyse(measured, run)}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(markdown(report))


if __name__ == "__main__":
    main()
