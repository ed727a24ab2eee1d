"""Memory through RL: a run of many steps holds at its last step what it held at its fifth.

The tiny recipe's run counts, after every RL step (`log.memory_census`), the live torch tensors and
gc-tracked objects the garbage collector reaches, and the resident size after malloc's free pages
went back (`model.release_memory`). A reference kept from step to step (trajectories, batches,
tensors in a cache, the producer's or the collapse monitor's state) grows the counts with the steps.
"""

from __future__ import annotations

import json

import pytest

from agentic_rl.trainer import loop
from agentic_rl.trainer.config import load_config

STEPS = 12
# Margins, from runs of this test on a shared 2-core machine:
# - tensors: a run holds a fixed set (weights, AdamW moments, the sampler's copy); the count was the
#   same (25) at every step, so it must be equal.
# - gc objects (counted after a collection): flat from step 2 on, within 1 between steps 5 and 12.
#   Keeping each step's trained groups alive (one group of two trajectories) added 9 a step, 63 by
#   step 12; the margin, 32, catches that and is 32 times the measured spread.
# - resident size: within 0.1 MB between steps 5 and 12 (with malloc's free pages released each
#   step); 20 MB is two hundred times that.
GC_MARGIN = 32
RSS_MARGIN_GB = 0.02


@pytest.mark.slow  # twelve RL steps: a bound measured like a benchmark, in make test-slow
def test_the_twelfth_rl_step_holds_what_the_fifth_held(tmp_path):
    cfg = load_config("recipes/tiny.yaml", [f"output_dir={tmp_path}", f"rl.steps={STEPS}", "log.memory_census=true",
                                            "eval.baselines=false", "sft.examples=0", "rl.tasks.per_step=1",
                                            "rl.tasks.group_size=2", "eval.tasks_per_split=1", "checkpoint.every=100"])
    loop.train(cfg)
    rows = {r["step"]: r for r in map(json.loads, (tmp_path / "metrics.jsonl").read_text().splitlines())
            if r["stage"] == "rl"}
    fifth, last = rows[5], rows[STEPS]
    assert last["mem_tensors"] == fifth["mem_tensors"], (fifth, last)
    assert last["mem_gc_objects"] - fifth["mem_gc_objects"] <= GC_MARGIN, (fifth, last)
    assert last["mem_rss_gb"] - fifth["mem_rss_gb"] <= RSS_MARGIN_GB, (fifth, last)
