"""What a state checkpoint costs the training thread, written synchronously or in the background.

    python benchmarks/bench_state_save.py [--checkpoint runs/calculator/checkpoints/sft --threads 2 --reps 3]

The policy (the packaged SmolLM2-135M by default) with AdamW moments, as an RL step leaves them, is
saved by `StateStore.save` in two arms, alternated in every repetition:

  sync    the state written before `save` returns (`checkpoint.async_save: false`)
  async   `save` copies the tensors and returns; a writer thread writes while the training thread
          runs its next piece of work (`checkpoint.async_save: true`; off by default)

After each save the training thread runs a fixed workload (forward and backward passes of the model
on a recipe-sized micro-batch); the same workload also runs with no save at all. The cost to the
training thread is the time `save` blocks plus how much longer the workload takes while the write is
in flight. Written to benchmarks/results/state_save.json.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import torch
from bench_train_step import _cpu  # benchmarks/ is on the path of a script run from it

from agentic_rl.models.loader import load_model
from agentic_rl.trainer.config import CheckpointConfig
from agentic_rl.trainer.state import Progress, StateStore

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "state_save.json"


def workload(model, ids: torch.Tensor, passes: int) -> float:
    """Seconds of `passes` forward and backward passes under bf16 autocast (the recipe's update)."""
    t0 = time.perf_counter()
    for _ in range(passes):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = model(input_ids=ids).logits[:, -8:].float().logsumexp(-1).mean()
        loss.backward()
    model.zero_grad(set_to_none=True)
    return time.perf_counter() - t0


def one_rep(model, optimizer, ids, passes: int, store: StateStore | None) -> dict:
    if store is None:
        return {"blocked_s": 0.0, "workload_s": workload(model, ids, passes)}
    t0 = time.perf_counter()
    store.save("rl-step1", Progress(rl_step=1), model, optimizer)
    blocked = time.perf_counter() - t0
    work = workload(model, ids, passes)
    t1 = time.perf_counter()
    store.wait()
    return {"blocked_s": blocked, "workload_s": work, "waited_after_s": time.perf_counter() - t1}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--checkpoint", default="smollm2")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--passes", type=int, default=4, help="forward+backward passes of the workload")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    model, _ = load_model(args.checkpoint)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5, fused=True)
    ids = torch.randint(0, model.config.vocab_size, (8, 160))  # a recipe micro-batch: 8 rows of ~160 tokens
    workload(model, ids, 1)
    for p in model.parameters():  # AdamW moments of every parameter, as after the first RL step
        p.grad = torch.randn_like(p) * 1e-3
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    root = Path(tempfile.mkdtemp(prefix="bench-state-", dir=ROOT / "runs" if (ROOT / "runs").exists() else None))
    arms = ("none", "sync", "async")
    stores = {arm: StateStore(root / arm, CheckpointConfig(async_save=arm == "async", keep_last=1))
              for arm in arms[1:]}
    runs: dict[str, list[dict]] = {arm: [] for arm in arms}
    try:
        for _ in range(args.reps):
            for arm in arms:
                runs[arm].append(one_rep(model, optimizer, ids, args.passes, stores.get(arm)))
                print(arm, {k: round(v, 2) for k, v in runs[arm][-1].items()}, flush=True)
        size = sum(f.stat().st_size for f in (root / "sync").rglob("*.pt"))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    alone = statistics.median(r["workload_s"] for r in runs["none"])
    cost = {arm: statistics.median(r["blocked_s"] + r["workload_s"] - alone for r in runs[arm])
            for arm in ("sync", "async")}
    out = {"machine": {"threads": args.threads, "cpu": _cpu()}, "state_gb": round(size / 1e9, 2),
           "workload_alone_s": round(alone, 2), "runs": runs,
           "cost_to_training_s": {k: round(v, 2) for k, v in cost.items()},
           "ratio_sync_over_async": round(cost["sync"] / max(cost["async"], 1e-9), 2)}
    RESULTS.write_text(json.dumps(out, indent=2))
    print(json.dumps({k: out[k] for k in ("state_gb", "workload_alone_s", "cost_to_training_s", "ratio_sync_over_async")}))


if __name__ == "__main__":
    main()
