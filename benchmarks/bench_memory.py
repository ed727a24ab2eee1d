"""Resident memory per RL step of a recipe, with and without malloc's free pages given back.

    python benchmarks/bench_memory.py [recipes/calculator.yaml] --steps 12 [--census] [--arms off,on]
        [--set KEY=VALUE ...] [--out benchmarks/results/memory.json]

Each arm is one `agentic-rl train` of the recipe cut to `--steps` RL steps, in a process of its own
(what an allocator keeps is a process's history), one after the other: `off` with
`model.release_memory=false`, `on` with it true (the default: `models/memory.release_free_memory`
after every step). From each run's metrics.jsonl it prints, per RL step, the resident memory at the
step's end (`mem_rss_gb`), the peak so far (`mem_peak_rss_gb`), glibc malloc's account (handed out,
and free chunks kept in its heaps) and, with `--census` (`log.memory_census`), the live tensors and
gc-tracked objects. A resident size that grows while the live tensors and objects stay flat is the
allocator's, not a leak. Every arm samples and trains the same tokens (the behaviour guard's
metrics hold no mem_ field). Written to benchmarks/results/memory.json (or --out).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "memory.json"
ARMS = {"off": "model.release_memory=false", "on": "model.release_memory=true"}
COLUMNS = ("mem_rss_gb", "mem_peak_rss_gb", "mem_heap_used_gb", "mem_heap_free_gb", "mem_tensors", "mem_gc_objects")


def run_arm(recipe: str, steps: int, overrides: list[str], folder: Path) -> tuple[list[dict], float]:
    """The RL steps' memory rows of one training run, and its seconds."""
    sets = [f"rl.steps={steps}", f"output_dir={folder}", "log.progress=false", *overrides]
    cmd = [sys.executable, "-m", "agentic_rl.cli", "train", recipe, *[a for s in sets for a in ("--set", s)]]
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, cwd=ROOT)
    rows = [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines()]
    return [{"step": r["step"], **{k: r[k] for k in COLUMNS if k in r}} for r in rows if r.get("stage") == "rl"], \
        time.perf_counter() - t0


def table(arms: dict[str, list[dict]]) -> str:
    """One line per step and arm."""
    lines = ["arm  step  " + "  ".join(c.removeprefix("mem_") for c in COLUMNS)]
    for name, rows in arms.items():
        for r in rows:
            lines.append(f"{name:<4} {r['step']:>4}  " + "  ".join(
                "-" if c not in r else f"{r[c]:.3f}" if c.endswith("_gb") else str(int(r[c])) for c in COLUMNS))
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("recipe", nargs="?", default="recipes/calculator.yaml")
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--arms", default="off,on", help=f"comma-separated, of {sorted(ARMS)}")
    p.add_argument("--census", action="store_true", help="log.memory_census: count live tensors and gc objects")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--out", type=Path, default=RESULTS)
    args = p.parse_args()
    extra = [*args.overrides, *(["log.memory_census=true"] if args.census else [])]
    arms, seconds = {}, {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.arms.split(","):
            arms[name], seconds[name] = run_arm(args.recipe, args.steps, [ARMS[name], *extra], Path(tmp) / name)
    print(table(arms))
    result = {"recipe": args.recipe, "steps": args.steps, "overrides": extra, "seconds": seconds, "arms": arms}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
