"""Rollout throughput of the swe_repair env without a model, at 1, 4 and 8 concurrent episodes:

    python benchmarks/bench_swe_sandbox.py [--episodes 16] [--concurrency 1,4,8]

Each episode is a demonstration played through the env's own tools (run the failing test, search,
read, edit, run the test files, submit: one repository session in the sandbox), then scored by the
reward (the patch replayed on a fresh copy, FAIL_TO_PASS and PASS_TO_PASS run). Episodes run on a
thread pool of the given size, as the rollout's concurrent episodes do. Reports episodes per second,
sandbox seconds per episode (wall time spent waiting on sandboxes: starts, operations, test runs,
the judging run) and the median wall time of one episode. Writes benchmarks/results/swe_sandbox.json.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import statistics
import time
from pathlib import Path

from agentic_rl.data import swe_instances as data
from agentic_rl.data.swe_demos import demonstration
from agentic_rl.envs.builtin import swe_repair
from agentic_rl.types import ToolCall, Trajectory, Turn

RESULTS = Path(__file__).resolve().parent / "results" / "swe_sandbox.json"


def episode(task) -> dict:
    """One demonstrated episode and its judging; seconds are wall clock."""
    t0 = time.perf_counter()
    env = swe_repair.SweRepairEnv({})
    try:
        demo = demonstration(task, env)
    finally:
        env.close()
    calls = [ToolCall(c["function"]["name"], c["function"]["arguments"]) for m in demo for c in m.get("tool_calls", ())]
    trajectory = Trajectory(task, tuple(Turn((), (), (), "", "stop", tool_calls=(c,)) for c in calls), terminated=True)
    swe_repair._CACHE.clear()  # every episode judged afresh, as distinct patches are
    score = swe_repair.make_reward({})(task, trajectory)
    return {"seconds": time.perf_counter() - t0, "sandbox_s": env.sandbox_seconds + score.details["sandbox_s"],
            "reward": score.value}


def measure(tasks, concurrency: int) -> dict:
    t0 = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(concurrency) as pool:
        rows = list(pool.map(episode, tasks))
    wall = time.perf_counter() - t0
    return {"concurrency": concurrency, "episodes": len(rows), "wall_s": round(wall, 2),
            "episodes_per_s": round(len(rows) / wall, 3),
            "sandbox_s_per_episode": round(statistics.fmean(r["sandbox_s"] for r in rows), 3),
            "episode_s_median": round(statistics.median(r["seconds"] for r in rows), 3),
            "reward_mean": statistics.fmean(r["reward"] for r in rows)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--episodes", type=int, default=16)
    ap.add_argument("--concurrency", default="1,4,8")
    args = ap.parse_args()
    tasks = data.make_tasks(data.load_shipped(), "train", args.episodes, 0)
    episode(tasks[0])  # warm the page cache and the project trees
    rows = [measure(tasks, int(c)) for c in args.concurrency.split(",")]
    load = os.getloadavg()
    out = {"rows": rows, "cpus": os.cpu_count(), "load_average_1_5_15": [round(x, 2) for x in load],
           "date": time.strftime("%Y-%m-%d %H:%M")}
    for r in rows:
        print(f"{r['concurrency']} concurrent: {r['episodes_per_s']:.2f} episodes/s, {r['sandbox_s_per_episode']:.2f} "
              f"sandbox s/episode, median episode {r['episode_s_median']:.2f} s, reward {r['reward_mean']:.2f}")
    print(f"load average {out['load_average_1_5_15']} on {out['cpus']} cores")
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
