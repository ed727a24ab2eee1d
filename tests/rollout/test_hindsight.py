"""Hindsight corrections on the calculator: failure points, hints, verification, and targets on
the student's context without the hint."""

from __future__ import annotations

import dataclasses

import pytest

from agentic_rl.engines.base import SamplingParams
from agentic_rl.engines.scripted import ScriptedEngine
from agentic_rl.envs.registry import get_env
from agentic_rl.rewards.scoring import score_groups
from agentic_rl.rollout.backends import Episodes
from agentic_rl.rollout.demos import demonstrate
from agentic_rl.rollout.hindsight import (
    as_context,
    demonstration_corrections,
    failed_episodes,
    failure_point,
    hindsight_corrections,
    hint,
    solution_hint,
)
from agentic_rl.rollout.loop import Budget, rollout
from agentic_rl.trainer.config import HindsightConfig
from agentic_rl.trainer.episodes import hindsight_options

CALL = '<tool_call>\n{{"name": "calculator", "arguments": {{"expression": "{}"}}}}\n</tool_call>'
SPEC = get_env("calculator")
BUDGET = Budget(4, 64, 256)


def episodes(params: SamplingParams) -> Episodes:
    return Episodes(lambda: SPEC.make_env({}), SPEC.make_reward({}), params, BUDGET)


def options(solution=None, **kw):
    """The recipe's hindsight defaults, with `kw` changed."""
    return hindsight_options(HindsightConfig(**kw), solution)


def _student(tokenizer):
    """Row 0: a good calculator call, then a wrong answer. Row 1: a failing call (1/0), then a wrong answer."""
    eos = tokenizer.eos_token
    script = {(0, 0): CALL.format("2+2"), (0, 1): f"<answer>0</answer>{eos}",
              (1, 0): CALL.format("1/0"), (1, 1): f"<answer>0</answer>{eos}"}
    tasks = SPEC.tasks("train", 2, 0)
    engine = ScriptedEngine(tokenizer, lambda row, turn: script[row, turn])
    params = SamplingParams(1.0, 1.0, 64, SPEC.make_env({}).format.stop_strings)
    groups, _ = rollout(engine, lambda: SPEC.make_env({}), tasks, 1, params, BUDGET)
    return score_groups(SPEC.make_reward({}), groups), params


def test_failure_points_and_hints(tokenizer):
    groups, _ = _student(tokenizer)
    a, b = (g.trajectories[0] for g in groups)
    assert a.reward < 1 and b.reward < 1
    assert failure_point(a) == 1 and failure_point(b) == 0  # the wrong answer; the failed call
    assert "error" in hint(b, False).lower() and "judged wrong" in hint(a, False)
    assert f"correct final answer is {a.task.answer}" in hint(a, True) and "correct final" not in hint(a, False)


def _computing_teacher(tokenizer, failed, right: bool = True):
    """Calls the calculator on the task's reference expression (or a wrong one), then answers with
    what the calculator returned."""
    from agentic_rl.tools.calculator import calculator

    expr = [f.task.meta["expression"] if right else "1+1" for f in failed]
    return ScriptedEngine(tokenizer, lambda row, turn: (CALL.format(expr[row]) if turn == 0
                                                else f"<answer>{calculator(expr[row])}</answer>{tokenizer.eos_token}"))


@pytest.mark.parametrize("teacher_right", [True, False])
def test_only_verified_corrections_are_kept_without_the_hint(tokenizer, teacher_right):
    groups, params = _student(tokenizer)
    failed = failed_episodes(groups, 1.0, 8)
    teacher = _computing_teacher(tokenizer, failed, teacher_right)
    out = hindsight_corrections(teacher, tokenizer, episodes(params), failed, options(reveal_answer=True))
    assert out.attempts == 2
    if not teacher_right:
        assert out.corrections == []
        return
    a, b = out.corrections
    # Row 0 keeps its good call as context (folded into the first trained turn's observation); row 1
    # restarts at the failed call. Each correction is the teacher's call and answer.
    assert [len(a.turns), len(b.turns)] == [2, 2]
    assert a.task.meta["failure_turn"] == 1 and b.task.meta["failure_turn"] == 0
    for fix, src in ((a, failed[0]), (b, failed[1])):
        text = tokenizer.decode(fix.token_ids())
        assert "Hint" not in text and src.task.prompt in text  # the student's context, not the teacher's
        assert fix.task.meta["provenance"] == "hindsight" and fix.task.meta["source_task"] == src.task.id
        assert "correct final answer" in fix.task.meta["hint"]
        assert fix.turns[-1].action_text.startswith(f"<answer>{src.task.answer}")
        assert text.count(tokenizer.eos_token) == text.count("<|im_start|>")  # one end-of-turn a message
        trained = tokenizer.decode([i for i, m in zip(fix.token_ids(), fix.loss_mask()) if m])
        assert "2+2" not in trained and src.task.meta["expression"] in trained  # the student's kept call is context
    assert "2+2" in tokenizer.decode(a.token_ids())


def test_a_correction_opens_with_the_students_exact_ids(tokenizer):
    """The correction's context is the failed episode's own token ids up to the failure point — the
    prompt, the kept turns and the observation after them, as sampled and fed — not a re-rendering of
    their text; what it trains is exactly the teacher's sampled actions. The student here sampled its
    kept call one character a token (the same text, not the tokenizer's own split), which a
    re-rendering of the text would not give back."""
    groups, params = _student(tokenizer)
    failed = failed_episodes(groups, 1.0, 8)
    kept = failed[0].turns[0]  # failed[0] keeps its first turn (failure_turn 1)
    spelled = tuple(i for ch in kept.action_text for i in tokenizer.encode(ch, add_special_tokens=False))
    assert spelled != kept.action_ids and tokenizer.decode(spelled) == kept.action_text
    failed[0] = dataclasses.replace(failed[0], turns=(
        dataclasses.replace(kept, action_ids=spelled, logprobs=(-1.0,) * len(spelled)), *failed[0].turns[1:]))
    teacher = _computing_teacher(tokenizer, failed, True)
    out = hindsight_corrections(teacher, tokenizer, episodes(params), failed, options(reveal_answer=True))
    for fix, src in zip(out.corrections, failed):
        k = fix.task.meta["failure_turn"]
        context = [i for turn in src.turns[:k] for i in (*turn.obs_ids, *turn.action_ids)] + list(src.turns[k].obs_ids)
        assert fix.token_ids()[: len(context)] == context
        assert fix.loss_mask()[: len(context)] == [0] * len(context)
        trained = [i for i, m in zip(fix.token_ids(), fix.loss_mask()) if m]
        assert trained == [i for turn in fix.turns for i in turn.action_ids]
        assert fix.reward == 1.0 and fix.terminated


@pytest.mark.parametrize("cheat", ["copy", "echo"])
def test_a_correction_that_copies_the_revealed_answer_is_not_kept(tokenizer, cheat):
    """A teacher that writes the hint's answer (straight away, or after asking the calculator to
    echo it) reaches reward 1; the correction teaches answering without computing, so it is dropped
    unless grounding is switched off."""
    groups, params = _student(tokenizer)
    failed = failed_episodes(groups, 1.0, 8)
    eos = tokenizer.eos_token

    def script(row, turn):
        if cheat == "echo" and turn == 0:
            return CALL.format(failed[row].task.answer)
        return f"<answer>{failed[row].task.answer}</answer>{eos}"

    args = (ScriptedEngine(tokenizer, script), tokenizer, episodes(params), failed)
    assert hindsight_corrections(*args, options()).corrections == []
    assert len(hindsight_corrections(*args, options(grounded=False)).corrections) == 2


def _call(expr):
    return {"type": "function", "function": {"name": "calculator", "arguments": {"expression": expr}}}


def test_restart_and_the_solution_hint(tokenizer):
    """restart=start rewrites the episode from the prompt; the solution hint shows the reference
    calls in the policy's own call syntax, and the teacher sees it while the target does not."""
    groups, params = _student(tokenizer)
    failed = failed_episodes(groups, 1.0, 8)
    demo = SPEC.demonstration(failed[0].task, SPEC.make_env({}))
    sol = solution_hint(demo)
    steps = failed[0].task.meta["steps"]
    assert sol is not None and f'"expression": "{steps[0]}"' in sol
    two = solution_hint([{"role": "assistant", "tool_calls": [_call("16 * 51")]}, {"role": "tool", "content": "816"},
                         {"role": "assistant", "tool_calls": [_call("816 / 4")]}, {"role": "tool", "content": "204"}])
    assert '"16 * 51"' in two and '"<result of call 1> / 4"' in two and "816" not in two  # no leaked intermediate
    start = options(solution=lambda task: solution_hint(SPEC.demonstration(task, SPEC.make_env({}))),
                    restart="start")
    out = hindsight_corrections(_computing_teacher(tokenizer, failed), tokenizer, episodes(params), failed, start)
    assert sol in out.corrections[0].task.meta["hint"]  # the hint the teacher was given
    assert len(out.corrections) == 2 and all(c.task.meta["failure_turn"] == 0 for c in out.corrections)
    assert all("2+2" not in tokenizer.decode(c.token_ids()) and "A correct solution" not in tokenizer.decode(
        c.token_ids()) for c in out.corrections)
    assert sum(out.corrections[0].loss_mask()) == sum(len(t.action_ids) for t in out.corrections[0].turns)


def test_as_context_keeps_the_tokens_and_masks_the_kept_turns(tokenizer):
    groups, _ = _student(tokenizer)
    t = groups[0].trajectories[0]
    folded = as_context(t, 1)
    assert folded.token_ids() == t.token_ids()  # token exactness: folding moves no token
    assert sum(folded.loss_mask()) == len(t.turns[1].action_ids)
    assert folded.loss_mask()[-len(t.turns[1].action_ids):] == [1] * len(t.turns[1].action_ids)
    assert as_context(t, 0) is t


def test_failures_are_spread_over_tasks_hardest_first():
    """Invariant: a task's second failure is picked only after every group's first, and groups with
    fewer successes come first (an all-failed group is where GRPO has no signal)."""
    from agentic_rl.types import Task, Trajectory, TrajectoryGroup, Turn

    turn = (Turn((1,), (2,), (0.0,), "x", "eos"),)

    def group(name: str, rewards: list[float]) -> TrajectoryGroup:
        task = Task(name, "p", 1)
        return TrajectoryGroup(task, tuple(Trajectory(task, turn, r) for r in rewards))

    groups = [group("half", [1.0, 0.1, 0.1, 1.0]), group("none", [0.1, 0.0, 0.1, 0.1]), group("all", [1.0] * 4),
              group("one", [0.1, 1.0, 1.0, 1.0])]
    # successes: none 0, half 2, one 3, all 4 (no failure); failures: none 4, half 2, one 1
    picked = [t.task.id for t in failed_episodes(groups, 1.0, 7)]
    assert picked == ["none", "half", "one", "none", "half", "none", "none"]
    assert failed_episodes(groups, 1.0, 2) == [groups[1].trajectories[0], groups[0].trajectories[1]]


def test_one_failure_per_task_when_the_episode_is_rewritten():
    from agentic_rl.types import Task, Trajectory, TrajectoryGroup, Turn

    turn = (Turn((1,), (2,), (0.0,), "x", "eos"),)
    groups = [TrajectoryGroup(Task(n, "p", 1), tuple(Trajectory(Task(n, "p", 1), turn, 0.0) for _ in range(3)))
              for n in ("a", "b")]
    assert [t.task.id for t in failed_episodes(groups, 1.0, 8, one_per_task=True)] == ["a", "b"]
    assert len(failed_episodes(groups, 1.0, 8)) == 6


def test_with_the_solution_shown_a_correction_must_compute_with_the_tool(tokenizer):
    """A teacher shown the reference solution that answers from its head is verified by the reward
    but trains the student to skip the tool: dropped while grounded, kept when grounding is off."""
    groups, params = _student(tokenizer)
    failed = failed_episodes(groups, 1.0, 8)
    eos = tokenizer.eos_token
    teacher = ScriptedEngine(tokenizer, lambda row, turn: f"<answer>{failed[row].task.answer}</answer>{eos}")
    solution = lambda task: solution_hint(SPEC.demonstration(task, SPEC.make_env({})))  # noqa: E731
    args = (teacher, tokenizer, episodes(params), failed)
    assert hindsight_corrections(*args, options(reveal_answer=False, solution=solution,
                                                restart="start")).corrections == []
    kept = hindsight_corrections(*args, options(reveal_answer=False, solution=solution, restart="start",
                                                grounded=False)).corrections
    assert len(kept) == 2


def test_the_demonstration_teacher_gives_the_env_solution_once_a_task(tokenizer):
    """Failures of one task share one correction: the env's own demonstration, token for token and
    mask for mask what SFT would train on, tagged as hindsight."""
    groups, _ = _student(tokenizer)
    a, b = (g.trajectories[0] for g in groups)
    result = demonstration_corrections(SPEC, {}, tokenizer, [a, b, a])
    assert result.attempts == 2 and [t.task.id for t in result.corrections] == [a.task.id, b.task.id]
    for t, fix in zip((a, b), result.corrections):
        demo = demonstrate(SPEC, {}, t.task, tokenizer)[1]
        assert fix.token_ids() == demo.token_ids() and fix.loss_mask() == demo.loss_mask()
        assert fix.task.meta["provenance"] == "hindsight" and fix.task.meta["hint"] == "demonstration"
        assert fix.task.meta["expression"] == t.task.meta["expression"]  # the task's own meta is kept


def test_the_demonstration_teacher_needs_an_env_with_demonstrations(tokenizer):
    groups, _ = _student(tokenizer)
    with pytest.raises(ValueError, match="no demonstrations"):
        demonstration_corrections(dataclasses.replace(SPEC, demonstration=None), {}, tokenizer,
                                  [groups[0].trajectories[0]])
