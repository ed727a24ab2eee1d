"""The RL learning-rate schedule: warmup then constant / linear / cosine, kept in the optimizer."""

from __future__ import annotations

import math

import pytest

from agentic_rl.trainer.schedule import lr_factor


def test_warmup_ramps_linearly_to_one():
    assert [lr_factor("constant", s, 10, 4) for s in range(1, 7)] == [0.25, 0.5, 0.75, 1.0, 1.0, 1.0]


@pytest.mark.parametrize("schedule", ["linear", "cosine"])
def test_decay_is_monotone_and_stays_above_zero(schedule):
    fs = [lr_factor(schedule, s, 12, 2) for s in range(1, 13)]
    after = fs[2:]
    assert all(a > b for a, b in zip(after, after[1:])) and after[-1] > 0


def test_decay_values():
    """12 steps, 2 warmup: step 3 is 1/11 of the way through the remaining 11 (+1) positions.
    linear: 1 - 1/11; cosine: (1 + cos(pi/11)) / 2."""
    assert lr_factor("linear", 3, 12, 2) == pytest.approx(1 - 1 / 11)
    assert lr_factor("cosine", 3, 12, 2) == pytest.approx(0.5 * (1 + math.cos(math.pi / 11)))
