"""The verifier ladder: climbs while tiers pass, stops at the first rejection (unless high-value),
escalates the uncertain, caches by content, respects the step budget, and serves late verdicts."""

from __future__ import annotations

import shutil

import pytest

from agentic_rl.rewards.ladder import QueueTier, Tier, VerifierLadder, content_key
from agentic_rl.types import Task

TASK = Task("t1", "q", "42")


def _tiers(log):
    def tier(name, rule):
        return Tier(name, lambda task, c: (log.append(name), rule(c))[1], cost={"cheap": 1, "mid": 10, "top": 100}[name])
    return [tier("cheap", lambda c: c.isdigit()), tier("mid", lambda c: int(c) > 10 if c != "?" else None),
            tier("top", lambda c: c == "42")]


def test_climbs_while_passing_and_stops_at_a_rejection():
    log = []
    ladder = VerifierLadder(_tiers(log), extract=lambda t: None)
    assert ladder.verify(TASK, "x").value == 0.0 and log == ["cheap"]  # rejected cheaply
    log.clear()
    assert ladder.verify(TASK, "7").value == 0.0 and log == ["cheap", "mid"]
    log.clear()
    s = ladder.verify(TASK, "42")
    assert s.value == 1.0 and log == ["cheap", "mid", "top"] and s.cost == 111 and s.details["tier_reached"] == 3
    m = ladder.metrics()
    assert m["ladder/cheap/calls"] == 3 and m["ladder/top/calls"] == 1 and m["ladder/mid/pass_rate"] == 0.5


def test_cache_by_content_and_high_value_second_opinions():
    log = []
    ladder = VerifierLadder(_tiers(log), extract=lambda t: None, high_value=lambda task: task.id == "vip")
    ladder.verify(TASK, "42")
    log.clear()
    assert ladder.verify(TASK, "42").details["cached"] == 1.0 and log == [] and ladder.cache_hits == 1
    ladder.verify(Task("vip", "q2"), "abc")  # rejected by cheap, but high-value: every tier weighs in
    assert log == ["cheap", "mid", "top"]


def test_uncertain_escalates_and_budget_caps_spend():
    log = []
    ladder = VerifierLadder(_tiers(log), extract=lambda t: None, budget_per_step=50)
    s = ladder.verify(TASK, "12")  # cheap 1 + mid 10, then top (100) would exceed the budget of 50
    assert s.details["pending"] == 1.0 and s.value == 0.0 and ladder.over_budget == 1 and log == ["cheap", "mid"]
    ladder.new_step()
    ladder.budget = None
    log.clear()
    tiers = _tiers(log)
    tiers[0] = Tier("cheap", lambda task, c: (log.append("cheap"), True)[1], cost=1)
    VerifierLadder(tiers, extract=lambda t: None).verify(TASK, "?")  # mid is unsure about "?": top decides
    assert log == ["cheap", "mid", "top"]


def test_queue_tier_serves_late_verdicts():
    human = QueueTier("human", check=None, cost=1000)
    ladder = VerifierLadder([Tier("cheap", lambda t, c: True, cost=1), human], extract=lambda t: None)
    first = ladder.verify(TASK, "42")
    assert first.details["pending"] == 1.0 and content_key(TASK, "42") in human.pending
    human.resolve(content_key(TASK, "42"), True)
    assert ladder.verify(TASK, "42").value == 1.0 and not human.pending


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")
def test_code_tiers_accept_what_the_full_suite_accepts():
    from agentic_rl.rewards.code_tiers import ExamplesCheck, code_tiers, full_suite, humaneval_tasks, mutants

    tasks = humaneval_tasks()[:4]
    examples = ExamplesCheck()
    ladder = VerifierLadder(code_tiers(examples), extract=lambda t: None)
    try:
        for t in tasks:
            for _, c in [("canonical", t.answer), *mutants(t.answer)]:
                assert (ladder.verify(t, c).value == 1.0) == full_suite(t, c)
    finally:
        examples.close()
