"""Peak memory of a row of several segments (an episode whose context started over, SFT packing):
what the trainer builds for its attention, and a forward and backward pass through it.

    python benchmarks/bench_segment_mask.py [--rows 8 --tokens 40000 --segments 8]

Each measurement runs in a process of its own and reports the growth of that process's peak
resident memory over its baseline (torch imported, the inputs built), so no measurement hides
another's peak.

  layout        what the forward pass builds now (`models/forward.segment_layout`): each row's
                segment spans and its positions, O(B T)
  dense mask    the (B, 1, T, T) additive fp32 mask a single attention call over the whole row needs
                (causal within a segment, nothing across), with its boolean intermediates; measured
                at rows of 4k, 8k and 16k tokens and its size computed at the asked shape
  forward+backward  the tiny model's decoder over one row, hidden states squared and summed, then
                backward: attention segment by segment against the dense mask given whole to the
                model, at 8k tokens

Written to benchmarks/results/segment_mask.json.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "segment_mask.json"


def _segments(B: int, T: int, n: int):
    import torch

    seg = torch.arange(T).div(-(-T // n), rounding_mode="floor").expand(B, T).clone()
    seg[0, -T // 10 :] = -1  # a padded row
    return seg


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _dense(seg):
    import torch

    B, T = seg.shape
    allowed = (seg[:, :, None] == seg[:, None, :]) & torch.ones(T, T, dtype=torch.bool).tril()
    return torch.zeros(B, 1, T, T).masked_fill(~allowed[:, None], torch.finfo(torch.float32).min)


def measure(kind: str, B: int, T: int, n: int) -> dict:
    """In this process: the peak resident growth (MB) of building `kind` for B rows of T tokens."""
    import torch

    torch.set_num_threads(1)
    seg = _segments(B, T, n)
    if kind.startswith("pass"):
        return _forward_backward(kind, seg)
    from agentic_rl.models.forward import segment_layout

    base = _peak_mb()
    built = segment_layout(seg) if kind == "layout" else _dense(seg)
    return {"kind": kind, "rows": B, "tokens": T, "segments": n, "peak_growth_mb": round(_peak_mb() - base, 1),
            "built": [len(built[0][0]), len(built[0][1])] if kind == "layout" else list(built.shape)}


def _forward_backward(kind: str, seg) -> dict:
    import torch

    from agentic_rl.models.attention import segment_attention, training_attention
    from agentic_rl.models.forward import segment_layout
    from agentic_rl.models.loader import load_tokenizer, tiny_model

    model = tiny_model(load_tokenizer("tiny"), seed=0)
    model.train()
    decoder = model.get_decoder()
    ids = torch.randint(100, 5000, seg.shape, generator=torch.Generator().manual_seed(0))
    spans, positions = segment_layout(seg)
    base = _peak_mb()
    if kind == "pass_segments":
        with segment_attention(decoder):
            hidden = decoder(input_ids=ids, position_ids=positions, segment_spans=spans).last_hidden_state
    else:
        with training_attention(decoder):
            hidden = decoder(input_ids=ids, attention_mask=_dense(seg), position_ids=positions).last_hidden_state
    hidden.square().sum().backward()
    B, T = seg.shape
    return {"kind": kind, "rows": B, "tokens": T, "segments": len(spans[0]), "peak_growth_mb": round(_peak_mb() - base, 1)}


def run(kind: str, B: int, T: int, n: int) -> dict:
    out = subprocess.run([sys.executable, __file__, "--one", kind, str(B), str(T), str(n)], check=True, cwd=ROOT,
                         capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"})
    return json.loads(out.stdout.splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=8)
    ap.add_argument("--tokens", type=int, default=40_000)
    ap.add_argument("--segments", type=int, default=8)
    ap.add_argument("--one", nargs=4, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        kind, *shape = args.one
        print(json.dumps(measure(kind, *map(int, shape))))
        return
    B, T, n = args.rows, args.tokens, args.segments
    dense = [run("dense", 1, t, n) for t in (4_000, 8_000, 16_000)]
    per_element = dense[-1]["peak_growth_mb"] * 1e6 / dense[-1]["tokens"] ** 2  # bytes: the mask and its intermediates
    result = {
        "layout": run("layout", B, T, n),
        "dense_mask": dense,
        "dense_mask_gb_at_shape": round(B * T * T * 4 / 1e9, 1),  # the fp32 mask alone
        "dense_peak_gb_at_shape": round(B * T * T * per_element / 1e9, 1),  # at the peak bytes an element measured
        "forward_backward": [run(k, 1, 8_000, 4) for k in ("pass_segments", "pass_dense")],
    }
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
