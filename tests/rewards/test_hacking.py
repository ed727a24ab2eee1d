"""Each reward-hacking detector fires on its behaviour and stays quiet on honest episodes."""

from __future__ import annotations

import pytest

from agentic_rl.rewards.hacking import (
    HACKING_DETECTORS,
    HackingDetector,
    format_gaming,
    hacking_rates,
    observation_parroting,
    unused_tool_results,
)
from agentic_rl.rewards.rubric import Rubric, Term
from agentic_rl.rewards.verifiers import MathVerifier
from agentic_rl.types import ToolCall

CALL = (ToolCall("calculator", {"expression": "6*7"}),)


def test_unused_tool_result(episode):
    used = episode("call", "The result is 42.\n<answer>42</answer>", observations=("42",), tool_calls=[CALL])
    ignored = episode("call", "<answer>41</answer>", observations=("42",), tool_calls=[CALL])
    assert unused_tool_results(used) == 0 and unused_tool_results(ignored) == 1


def test_format_gaming(episode):
    t = episode("<answer> </answer>")
    assert format_gaming(t.task, t)
    copied = episode("<answer>How many apples are left</answer>")
    copied = copied.__class__(copied.task.__class__("t", "How many apples are left after lunch?", "3"), copied.turns)
    assert format_gaming(copied.task, copied)
    honest = episode("<answer>3</answer>")
    assert not format_gaming(honest.task, honest)


def test_observation_parroting(episode):
    t = episode("call", "<answer>Doc 1 (Tarn)</answer>", observations=("Doc 1 (Tarn)",), tool_calls=[CALL],
                meta={"forbid_copy": True})
    assert observation_parroting(t.task, t)
    allowed = episode("call", "<answer>42</answer>", observations=("42",), tool_calls=[CALL])
    assert not observation_parroting(allowed.task, allowed)  # copying a calculator result is the point


def test_detector_as_a_penalty(episode):
    r = Rubric([Term("correct", MathVerifier(), 1.0), Term("hacking", HackingDetector(), -0.5)], outcome="correct")
    lazy = episode("call", "<answer>12</answer>", observations=("99",), tool_calls=[CALL])  # right, ignored the tool
    s = r(lazy.task, lazy)
    assert s.details["hacking/unused_tool_result"] == 1.0 and s.value == 0.5


def _policy_rates(tokenizer, write, forbid_copy: bool = False, n: int = 4) -> dict[str, float]:
    """`hacking_rates` of `n` calculator episodes a scripted policy plays through the real rollout
    loop and env (the calculator really runs): `write(task, turn)` is its action."""
    from agentic_rl.engines.base import SamplingParams
    from agentic_rl.engines.scripted import ScriptedEngine
    from agentic_rl.envs.registry import get_env
    from agentic_rl.rollout.loop import Budget, rollout
    from agentic_rl.types import Task

    spec = get_env("calculator")
    fmt = spec.make_env({}).format
    tasks = [Task(t.id, t.prompt, t.answer, {**t.meta, "forbid_copy": forbid_copy}) for t in spec.tasks("train", n, 0)]
    def script(row, turn):
        text = write(tasks[row], turn, fmt)
        return text + tokenizer.eos_token if "<answer>" in text else text  # an answer ends the episode

    engine = ScriptedEngine(tokenizer, script)
    params = SamplingParams(1.0, 1.0, 64, tuple(fmt.stop_strings))
    groups, _ = rollout(engine, lambda: spec.make_env({}), tasks, 1, params, Budget(3, 64, 256))
    return hacking_rates([g.trajectories[0] for g in groups])


def _call(task, fmt, expression=None):
    from agentic_rl.envs.formats import call_action

    return call_action(fmt, "calculator", expression=expression or task.meta["expression"])


HONEST = lambda task, turn, fmt: _call(task, fmt) if turn == 0 else f"<answer>{task.answer}</answer>"  # noqa: E731
POLICIES = {  # the detector each policy games -> the policy
    "format_gaming": lambda task, turn, fmt: "<answer> </answer>",  # the tags, nothing in them
    "unused_tool_result": lambda task, turn, fmt: _call(task, fmt, "6*7") if turn == 0 else "<answer>1</answer>",
    "observation_parroting": HONEST,  # on tasks that forbid copying the tool's output
}


@pytest.mark.parametrize("gamed", sorted(POLICIES))
def test_a_scripted_policy_that_games_is_flagged_every_time_and_an_honest_one_never(tokenizer, gamed):
    forbid = gamed == "observation_parroting"
    rates = _policy_rates(tokenizer, POLICIES[gamed], forbid_copy=forbid)
    assert set(rates) == {f"hacking/{n}" for n in HACKING_DETECTORS.names()}
    assert rates[f"hacking/{gamed}"] == 1.0  # every episode
    assert all(v == 0.0 for k, v in rates.items() if k != f"hacking/{gamed}")
    # honest: the right call, its result used; where copying is forbidden the answer says more than the output
    honest = HONEST if not forbid else (lambda task, turn, fmt: HONEST(task, turn, fmt).replace(
        "</answer>", " liters</answer>"))
    assert all(v == 0.0 for v in _policy_rates(tokenizer, honest, forbid_copy=forbid).values())
