"""How often one fixed walk, the same on every map, reaches G on FrozenLake's held-out maps.

    python benchmarks/frozen_lake_fixed_walk.py [--tasks 50]

A policy that learned to read the map beats every map-blind walk; one that scores exactly what a
fixed walk scores has learned the walk. The held-out maps are those `recipes/frozen_lake.yaml`
evaluates (`SPEC.tasks('heldout', eval.tasks_per_split, eval.seed)`); each walk is played on the map
as gymnasium's non-slippery FrozenLake plays it (a move off the grid stays put, a hole ends it).
"""

from __future__ import annotations

import argparse
import itertools
import json

from agentic_rl.envs.builtin.frozen_lake import MOVES, SPEC, random_map


def reaches_goal(desc: list[str], moves: list[str]) -> bool:
    r = c = 0
    for m in moves:
        dr, dc = MOVES[m]
        r, c = min(max(r + dr, 0), len(desc) - 1), min(max(c + dc, 0), len(desc) - 1)
        if desc[r][c] in "HG":
            return desc[r][c] == "G"
    return False


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", type=int, default=50, help="eval.tasks_per_split")
    ap.add_argument("--seed", type=int, default=12345, help="eval.seed (the recipe's default)")
    args = ap.parse_args()
    maps = [random_map(int(t.meta["seed"])) for t in SPEC.tasks("heldout", args.tasks, args.seed)]
    # every monotone walk from S to G: 3 downs and 3 rights in some order
    walks = sorted(set(itertools.permutations(["down"] * 3 + ["right"] * 3)))
    rates = {" ".join(w): sum(reaches_goal(m, list(w)) for m in maps) / len(maps) for w in walks}
    best = max(rates, key=rates.get)
    print(json.dumps({"maps": len(maps), "best_fixed_walk": best, "best_rate": rates[best], "rates": rates}, indent=1))


if __name__ == "__main__":
    main()
