"""Overhead of running model code, per execution of `print(1)`, side by side in one run:

    python benchmarks/bench_sandbox.py [--runs 50]

plain `python -I -S -c` in a subprocess (no isolation; the floor), then under each memory guard that
can run here (`agentic_rl/tools/sandbox/memory.py`: a cgroup per execution, or the supervisor) the
one-shot bubblewrap sandbox (`run_python`: a fresh interpreter per program) and a cell of a warm
`PythonSession` (the stateful interpreter the ReTool env uses). Writes benchmarks/results/sandbox.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import time
from pathlib import Path

from agentic_rl.tools.sandbox import PythonSession, SandboxConfig, run_python
from agentic_rl.tools.sandbox.memory import memory_cgroup_parent
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
    first_cell = {}
    for guard in ["supervisor"] if memory_cgroup_parent() is None else ["cgroup", "supervisor"]:
        config = SandboxConfig(memory_guard=guard)
        rows[f"sandbox, one-shot run_python, {guard} guard"] = timed(lambda c=config: run_python("print(1)", c), runs)
        with PythonSession(config) as session:
            rows[f"sandbox, PythonSession cell, {guard} guard"] = timed(lambda: session.run("print(1)"), runs)
        t0 = time.perf_counter()
        with PythonSession(config) as session:
            session.run("print(1)")
        first_cell[guard] = round((time.perf_counter() - t0) * 1000, 1)
    table = {k: {"median_ms": round(statistics.median(v), 2), "p90_ms": round(sorted(v)[int(0.9 * len(v))], 2)}
             for k, v in rows.items()}
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({"runs": runs, "python": python, "rows": table,
                                   "session_first_cell_ms": first_cell}, indent=2))
    print("| path | median ms | p90 ms |\n|---|---|---|")
    for k, v in table.items():
        print(f"| {k} | {v['median_ms']} | {v['p90_ms']} |")
    print(f"(a session's first cell, which starts its worker, ms: {first_cell})")


if __name__ == "__main__":
    main()
