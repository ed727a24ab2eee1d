"""Overhead of running model code, per execution of `print(1)`, side by side in one run:

    python benchmarks/bench_sandbox.py [--runs 50]

plain `python -I -S -c` in a subprocess (no isolation; the floor), the one-shot bubblewrap sandbox
(`run_python`: a fresh interpreter per program), and a cell of a warm `PythonSession` (the stateful
interpreter the ReTool env uses). Writes benchmarks/results/sandbox.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import time
from pathlib import Path

from agentic_rl.tools.sandbox import PythonSession, SandboxConfig, run_python
from agentic_rl.tools.sandbox.runner import interpreter

RESULTS = Path(__file__).resolve().parent / "results" / "sandbox.json"


def timed(fn, runs: int) -> list[float]:
    fn()  # warm the page cache
    out = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1000)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=50)
    runs = ap.parse_args().runs
    python = interpreter(SandboxConfig())
    rows = {"plain subprocess (no isolation)": timed(
        lambda: subprocess.run([python, "-I", "-S", "-c", "print(1)"], capture_output=True, check=True), runs)}
    rows["sandbox, one-shot run_python"] = timed(lambda: run_python("print(1)"), runs)
    with PythonSession() as session:
        rows["sandbox, PythonSession cell"] = timed(lambda: session.run("print(1)"), runs)
        t0 = time.perf_counter()
        PythonSession().run("print(1)")
        start_ms = (time.perf_counter() - t0) * 1000
    table = {k: {"median_ms": round(statistics.median(v), 2), "p90_ms": round(sorted(v)[int(0.9 * len(v))], 2)}
             for k, v in rows.items()}
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({"runs": runs, "python": python, "rows": table,
                                   "session_first_cell_ms": round(start_ms, 1)}, indent=2))
    print("| path | median ms | p90 ms |\n|---|---|---|")
    for k, v in table.items():
        print(f"| {k} | {v['median_ms']} | {v['p90_ms']} |")
    print(f"(a session's first cell, which starts its worker: {start_ms:.1f} ms)")


if __name__ == "__main__":
    main()
