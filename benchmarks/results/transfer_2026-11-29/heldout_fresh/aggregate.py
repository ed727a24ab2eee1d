"""heldout_fresh per arm: each seed's accuracy (its bootstrap interval), the mean over seeds with the
seeds' 95% t-interval (agentic_rl.monitor.intervals), and the per-template seed means.
usage: python aggregate.py FOLDER   (FOLDER/<arm>/seed<N>.json, written by `agentic-rl eval --out`)"""
import json
import sys
from pathlib import Path

from agentic_rl.monitor.intervals import ACCURACY, seed_interval

root = Path(sys.argv[1])
for arm in sorted(p for p in root.iterdir() if p.is_dir()):
    runs = {f.stem: json.loads(f.read_text())["heldout_fresh"] for f in sorted(arm.glob("seed*.json"))}
    xs = [r["accuracy"] for r in runs.values()]
    mean = sum(xs) / len(xs)
    ci = seed_interval(xs, ACCURACY) if len(xs) > 1 else None
    each = ", ".join(f"{k} {r['accuracy']:.2f} [{r['accuracy_ci'][0]:.2f}, {r['accuracy_ci'][1]:.2f}]" for k, r in runs.items())
    print(f"{arm.name}: {mean:.3f}" + (f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "") + f"  ({each})")
    templates = {}
    for r in runs.values():
        for t, x in r.get("accuracy_by_template", {}).items():
            templates.setdefault(t, []).append(x["accuracy"])
    print("   ", ", ".join(f"{t} {sum(v) / len(v):.2f}" for t, v in sorted(templates.items())))
