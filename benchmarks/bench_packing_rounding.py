"""How far each RL-update path's gradient is from the fp32 padded one: padded and packed
(`rl.optim.pack`), in fp32 and under bf16 autocast, on the same groups, over several draws.

    OMP_NUM_THREADS=1 python benchmarks/bench_packing_rounding.py [--mix main_job] [--seeds 0,1,2]
        [--model smollm2] [--correction none]

For each draw of `bench_packing.mix` (one process, SmolLM2-135M-Instruct's fp32 weights, one torch
thread, the calculator recipe's loss with the gradient clip lifted so the step sees the raw
gradient), each arm runs one `rl_update` and its gradient is kept, flattened, at the optimizer's
step. The rollout correction is off by default (`--correction`): the mixes' sampler logprobs are a
constant -1, so under `tis` a token's weight is exp(logprob + 1) below the cap, and the gradient
would weigh each token by its trainer logprob's rounding — a property of the synthetic sampler, not
of the paths compared. Against the fp32 padded gradient g0 each arm reports ||g - g0|| / ||g0||, the cosine, and
||g|| / ||g0||. fp32 packed against fp32 padded is the floor (the two paths' float order alone);
bf16 padded and bf16 packed are what autocast adds to each.

Written to benchmarks/results/packing_rounding.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
RESULTS = ROOT / "benchmarks" / "results" / "packing_rounding.json"
ARMS = {"fp32_padded": ("fp32", False), "fp32_packed": ("fp32", True),
        "bf16_padded": ("bf16", False), "bf16_packed": ("bf16", True)}


class _Kept:
    """An SGD of step size 0 that keeps the flattened gradient it is stepped with."""

    def __init__(self, params):
        import torch

        self.params = list(params)
        self.param_groups = [{"params": self.params}]
        self.grad = torch.zeros(0)

    def step(self):
        import torch

        self.grad = torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).flatten().float()
                               for p in self.params])

    def zero_grad(self, set_to_none: bool = True):
        for p in self.params:
            p.grad = None


def gradients(model_name: str, mix_name: str, seed: int, correction: str) -> dict:
    """Each arm's gradient on draw `seed` of the mix, in this process."""
    import torch
    from bench_packing import mix

    from agentic_rl.models.loader import load_model
    from agentic_rl.trainer.config import load_config
    from agentic_rl.trainer.credit import compute_credit
    from agentic_rl.trainer.loss_terms import build_loss
    from agentic_rl.trainer.update import UpdateBatch, rl_update
    from agentic_rl.types import RolloutBatch

    torch.set_num_threads(1)
    model, tokenizer = load_model(model_name)
    groups = mix(mix_name, seed=seed)
    out = {}
    for arm, (precision, pack) in ARMS.items():
        cfg = load_config(str(ROOT / "recipes" / "calculator.yaml"),
                          [f"model.name={model_name}", f"model.precision={precision}",
                           f"rl.optim.pack={str(pack).lower()}", "rl.optim.max_grad_norm=1e9",
                           f"rl.rollout_correction.mode={correction}"])
        optimizer = _Kept(model.parameters())
        batch = UpdateBatch(RolloutBatch(tuple(groups)), compute_credit(groups, cfg.rl.algorithm))
        t0 = time.perf_counter()
        rl_update(model, optimizer, batch, build_loss(cfg, model), cfg.rl.optim, tokenizer.pad_token_id)
        out[arm] = (optimizer.grad, time.perf_counter() - t0)
    return out


def compare(grads: dict) -> dict:
    ref = grads["fp32_padded"][0].double()
    rows = {}
    for arm, (g, seconds) in grads.items():
        g = g.double()
        rows[arm] = {"rel_err": float((g - ref).norm() / ref.norm()),
                     "cosine": float(g @ ref / (g.norm() * ref.norm())),
                     "norm_ratio": float(g.norm() / ref.norm()), "update_s": round(seconds, 1)}
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--mix", default="main_job")
    p.add_argument("--seeds", default="0,1,2")
    p.add_argument("--model", default="smollm2")
    p.add_argument("--correction", default="none", help="rl.rollout_correction.mode in every arm")
    p.add_argument("--out", type=Path, default=RESULTS)
    args = p.parse_args()
    draws = {}
    for seed in (int(s) for s in args.seeds.split(",")):
        draws[seed] = compare(gradients(args.model, args.mix, seed, args.correction))
        print(json.dumps({"seed": seed, **draws[seed]}), flush=True)
    summary = {arm: {k: statistics.fmean(d[arm][k] for d in draws.values()) for k in ("rel_err", "cosine", "norm_ratio")}
               for arm in ARMS}
    result = {"model": args.model, "mix": args.mix, "correction": args.correction, "threads": 1, "date": time.strftime("%Y-%m-%d"),
              "draws": {str(k): v for k, v in draws.items()}, "mean": summary}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
