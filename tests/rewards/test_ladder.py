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


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="the code tiers run model code in the bubblewrap sandbox")
def test_the_code_envs_ladder_reports_each_steps_calls_pass_rates_time_and_budget():
    """The code env's real reward (syntax -> examples -> full suite, in the sandbox), scored through
    the per-step hooks the RL producer calls. Step 1: the canonical solution climbs all three tiers,
    a stub (`return None`) parses and fails the examples, a syntax slip fails the first tier: syntax
    3 calls 2 passes, examples 2 calls 1 pass, full 1 call 1 pass. Step 2 counts afresh: the same
    solution again is a cache hit (no call), and a declared budget below the examples tier's cost
    turns a new candidate away after its syntax check."""
    from agentic_rl.data.code_tasks import make_tasks
    from agentic_rl.envs.builtin.code import make_reward
    from agentic_rl.rewards.base import new_step, step_metrics
    from agentic_rl.rewards.code_tiers import mutants
    from agentic_rl.types import Trajectory, Turn

    task = make_tasks(1, 3, "train")[0]
    kinds = dict(mutants(task.answer))

    def submitted(body: str) -> Trajectory:
        text = f"```python\n{task.meta['prompt']}{body}```"
        return Trajectory(task, (Turn((1,), (2,), (-0.1,), text, "eos"),), terminated=True)

    reward = make_reward({"ladder_budget": 0.003})  # syntax (1e-4) and full (5e-2) declared; examples 5e-3
    new_step(reward)
    ladder = reward.verifier
    assert ladder.budget == 0.003  # the env option
    ladder.budget = None  # step 1 unbudgeted
    values = [reward(task, submitted(b)).details["correct"] for b in (task.answer, kinds["stub"], kinds["syntax"])]
    m = step_metrics(reward)
    assert values == [1.0, 0.0, 0.0]
    assert [m[f"ladder/{t}/calls"] for t in ("syntax", "examples", "full")] == [3.0, 2.0, 1.0]
    assert [m[f"ladder/{t}/pass_rate"] for t in ("syntax", "examples", "full")] == [2 / 3, 0.5, 1.0]
    assert m["ladder/seconds"] == pytest.approx(sum(m[f"ladder/{t}/seconds"] for t in ("syntax", "examples", "full")))
    assert m["ladder/full/seconds"] > 0 and m["ladder/budget"] == 0.0
    ladder.budget = 0.003
    new_step(reward)
    reward(task, submitted(task.answer))  # cached
    reward(task, submitted(task.answer.replace("return", "return  ")))  # new: syntax passes, examples over budget
    m = step_metrics(reward)
    assert m["ladder/cache_hits"] == 1.0 and m["ladder/syntax/calls"] == 1.0 and m["ladder/examples/calls"] == 0.0
    assert m["ladder/over_budget"] == 1.0 and m["ladder/budget"] == 0.003 and m["ladder/spent"] == pytest.approx(1e-4)
