"""Hindsight supervision: failed episodes, corrected by a teacher that sees what went wrong.

For a failed trajectory (reward below `min_reward`):

1. the **failure point** is the first turn whose tool call failed (an error or a malformed call),
   else the final turn (a wrong answer); the turns before it are the student's own, kept;
2. the **hint** is what hindsight knows and the student did not: the tool errors, the verifier's
   verdict, and (with `reveal_answer`) the reference answer;
3. a **teacher** — the policy itself or another model — continues the episode from the failure point
   with the hint in its context (a fresh env replays the kept turns, so stateful tools are where the
   student left them), through the normal rollout loop;
4. the continuation is **verified** by the env's own reward; only verified corrections are kept;
5. each kept correction becomes a trajectory on the student's context **without the hint** — the
   prompt and the kept turns as the student's exact sampled and fed ids, then the teacher's turns as
   its own ids — in the same token layout as SFT and RL, nothing re-tokenized (`as_student_target`),
   tagged with its provenance (task meta `provenance: hindsight`, `source_task`, `failure_turn`,
   `hint`), ready to be trained on as an SFT target. The student's
   kept turns are context, not a target: only the teacher's turns are trained (a kept turn may hold
   the very call that went wrong).

With the answer in the hint, a verified correction can be a copy: "<answer>204</answer>" right after
a wrong tool result, or a calculator call on "204" itself. Such a target teaches the student to
answer without computing, so by default (`grounded`) a correction is kept only if a tool produced
the answer: it appears in an observation whose call did not already contain it. The same holds when
the hint shows the reference solution: a correction that answers from its head, or writes a tool
response of its own, passes the verifier without the tool and would teach the student to skip it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from agentic_rl.engines.base import Engine
from agentic_rl.envs.base import Env, close_env
from agentic_rl.registry import Registry
from agentic_rl.rewards.grounding import grounded, value_pattern
from agentic_rl.rewards.scoring import score_groups
from agentic_rl.rollout.backends import Episodes
from agentic_rl.rollout.demos import demonstrate
from agentic_rl.rollout.loop import rollout
from agentic_rl.types import Task, Trajectory


def failure_point(t: Trajectory) -> int:
    """Index of the first turn with a failed or malformed tool call, else of the last turn."""
    for k, turn in enumerate(t.turns):
        if turn.tool_errors or turn.malformed_calls:
            return k
    return max(len(t.turns) - 1, 0)


def hint(t: Trajectory, reveal_answer: bool, solution: str | None = None) -> str:
    """What went wrong, in words a model can use."""
    parts = [f"The tool returned an error: {turn.observation.strip()[:300]}"
             for turn in t.turns if turn.tool_errors or turn.malformed_calls]
    if not t.reward_details.get("correct", 0.0):
        last = t.turns[-1].action_text.strip()[-200:] if t.turns else ""
        parts.append(f"The previous attempt ended with {last!r}, which was judged wrong.")
    if solution:
        parts.append(solution)
    if reveal_answer:
        parts.append(f"The correct final answer is {t.task.answer}.")
    return "Hint (from a review of an earlier attempt): " + " ".join(parts)


def solution_hint(demo: Sequence[Mapping]) -> str | None:
    """The reference solution's tool calls (from the env's demonstration) in the call syntax the
    policy writes, or None when the demonstration makes none. A later call's use of an earlier
    result is shown as "<result of call i>": the value itself would leak what the student must
    compute (a correction could skip the first call and still be verified)."""
    calls: list[str] = []
    results: list[str] = []
    for m in demo:
        if m.get("role") == "tool":
            results.append(str(m.get("content", "")).strip())
        own_calls = (m.get("tool_calls") or ()) if m.get("role") == "assistant" else ()
        for c in own_calls:
            text = json.dumps({"name": c["function"]["name"], "arguments": c["function"]["arguments"]})
            for i, value in enumerate(results, 1):
                if value:
                    text = value_pattern(value).sub(f"<result of call {i}>", text)
            calls.append(text)
    return f"A correct solution makes these tool calls, in order: {'; then '.join(calls)}." if calls else None


def reference_solutions(spec, options: Mapping) -> Callable[[Task], str | None] | None:
    """task -> the hint's reference solution, from the env's own demonstration (made on a fresh env,
    closed after); None when the env has no demonstrations."""
    if spec.demonstration is None:
        return None

    def solution(task: Task) -> str | None:
        env = spec.make_env(options)
        try:
            return solution_hint(spec.demonstration(task, env))
        finally:
            close_env(env)

    return solution


def replay(env: Env, task: Task, actions: Sequence[str]) -> list[dict]:
    """The conversation a fresh env gives for `actions`: its prompt, then each action and the
    observation messages it returns (deterministic envs give back exactly the student's context).
    A sampled end-of-turn is dropped from the message text: rendering the message adds it back."""
    messages = list(env.reset(task))
    for action in actions:
        result = env.step(action)
        content = action.removesuffix(env.format.end_of_turn)
        messages += [{"role": "assistant", "content": content}, *[dict(m) for m in result.observation]]
    return messages


class HintedEnv:
    """`inner`, reset to the student's kept turns, with the hint appended as a user message."""

    def __init__(self, inner: Env, kept: Sequence[str], hint_text: str):
        self.inner, self.kept, self.hint_text = inner, list(kept), hint_text
        self.format, self.tool_schemas = inner.format, inner.tool_schemas

    def reset(self, task: Task) -> list[dict]:
        return [*replay(self.inner, task, self.kept), {"role": "user", "content": self.hint_text}]

    def step(self, action: str):
        return self.inner.step(action)

    def close(self) -> None:
        close_env(self.inner)


@dataclass(frozen=True)
class Restart:
    """Where a teacher picks up a failed episode."""

    turn: Callable[[Trajectory], int]  # the first turn the teacher writes; the student's turns before it are kept
    one_per_task: bool  # every failure of a task gives the teacher the same context: correct one a task


# hindsight.restart
RESTARTS: Registry[Restart] = Registry("hindsight restart")
RESTARTS.register("failure")(Restart(failure_point, one_per_task=False))
RESTARTS.register("start")(Restart(lambda t: 0, one_per_task=True))


@dataclass(frozen=True)
class HindsightOptions:
    """The hindsight section of a recipe (`HindsightConfig`), as the rollout uses it."""

    reveal_answer: bool  # the hint includes the reference answer
    solution: Callable[[Task], str | None] | None  # the reference solution for the hint (solution_hint)
    restart: str  # a RESTARTS name
    grounded: bool  # with the answer or solution revealed, keep only corrections whose answer a tool produced
    min_reward: float  # a correction must reach it


@dataclass(frozen=True)
class HindsightResult:
    corrections: list[Trajectory]  # verified, on the student's context without the hint
    attempts: int


def hindsight_corrections(engine: Engine, tokenizer, episodes: Episodes, failed: Sequence[Trajectory],
                          options: HindsightOptions, seed: int = 0) -> HindsightResult:
    """Verified corrections of `failed` written by `engine` (the teacher), its episodes made and
    scored as `episodes` says (the run's env, reward, sampling and budget)."""
    if not failed:
        return HindsightResult([], 0)
    restart = RESTARTS.get(options.restart)
    plans = []
    for t in failed:
        k = restart.turn(t)
        solution = options.solution(t.task) if options.solution else None
        # with the answer or the solution in the hint, a correction must compute with a tool (`grounded`)
        check = options.grounded and (options.reveal_answer or bool(solution))
        plans.append((t, k, hint(t, options.reveal_answer, solution), check))
    envs = iter([HintedEnv(episodes.make_env(), [turn.action_text for turn in t.turns[:k]], h)
                 for t, k, h, _ in plans])
    groups, _ = rollout(engine, lambda: next(envs), [t.task for t, *_ in plans], 1, episodes.params,
                        episodes.budget, seed=seed)
    groups = score_groups(episodes.reward, groups, episodes.budget.step_timeout_s)
    kept = []
    for (t, k, h, check), g in zip(plans, groups):
        fix = g.trajectories[0]
        if fix.error or fix.reward < options.min_reward or not fix.terminated:
            continue
        if check and not grounded(t.task.answer, [*t.turns[:k], *fix.turns]):
            continue
        kept.append(as_student_target(t, fix, k, h))
    return HindsightResult(kept, len(plans))


DEMONSTRATION_TEACHER = "demonstration"  # hindsight.teacher: the env's own solution, no sampling


def demonstration_corrections(spec, options: Mapping, tokenizer, failed: Sequence[Trajectory]) -> HindsightResult:
    """The env's own demonstration of each failed task, as the correction (an oracle teacher).

    A policy teacher can only correct what it can nearly solve; on a problem whose expression the
    student never samples, the hinted policy mostly fails too. The demonstration always exists, so
    the problems GRPO has no signal on get an expert solution to imitate — ReLIFT's interleaving of
    RL with fine-tuning on the hardest questions (Ma et al. 2025), here inside the RL step. Its
    correctness is the env's conformance check (`rollout/conformance.py`: every demonstration, replayed
    as the policy, earns full reward), not re-scored each step. Failures of one task share one
    demonstration, so each task is corrected once."""
    if spec.demonstration is None:
        raise ValueError(f"hindsight.teacher {DEMONSTRATION_TEACHER!r}: env {spec.name!r} has no demonstrations")
    kept, seen = [], set()
    for t in failed:
        if t.task.id in seen:
            continue
        seen.add(t.task.id)
        _, target = demonstrate(spec, options, t.task, tokenizer)
        tagged = Task(t.task.id, t.task.prompt, t.task.answer, {
            **t.task.meta, "provenance": "hindsight", "source_task": t.task.id, "failure_turn": 0,
            "hint": DEMONSTRATION_TEACHER})
        kept.append(replace(target, task=tagged))
    return HindsightResult(kept, len(seen))


def as_student_target(t: Trajectory, fix: Trajectory, k: int, h: str) -> Trajectory:
    """The correction as the student will train on it, from token ids only: the student's own first
    k turns and the observation after them exactly as it sampled and was fed them (context, not
    trained), then the teacher's actions and the observations between them as the teacher's episode
    holds them. The teacher's first action followed the hinted context; here it follows the student's."""
    task = t.task
    tagged = Task(task.id, task.prompt, task.answer, {**task.meta, "provenance": "hindsight",
                                                      "source_task": task.id, "failure_turn": k, "hint": h})
    context = [i for turn in t.turns[:k] for i in (*turn.obs_ids, *turn.action_ids)]
    first = replace(fix.turns[0], obs_ids=(*context, *t.turns[k].obs_ids))
    return Trajectory(tagged, (first, *fix.turns[1:]), reward=fix.reward, reward_details=fix.reward_details,
                      terminated=fix.terminated, truncated=fix.truncated)


def as_context(t: Trajectory, k: int) -> Trajectory:
    """`t` with its first k turns folded into the observation of turn k: the same tokens, the loss
    mask on the turns from k on only."""
    if k == 0:
        return t
    head = [i for turn in t.turns[:k] for i in (*turn.obs_ids, *turn.action_ids)]
    first = t.turns[k]
    return replace(t, turns=(replace(first, obs_ids=(*head, *first.obs_ids)), *t.turns[k + 1:]))


def failed_episodes(groups, min_reward: float, limit: int, one_per_task: bool = False) -> list[Trajectory]:
    """Up to `limit` failures of the step, spread over tasks: one failure of each group before a
    second of any, and groups with the fewest successes first. A group with no success is where
    GRPO has no signal and a correction adds the most; a second correction of the same task, from
    the same hint, mostly repeats the first; `one_per_task` (a teacher that rewrites the episode from
    the start sees the same context for every failure of a task) takes none. (Episodes that ended in
    an env error are not corrected.)"""
    def successes(g) -> int:
        return sum(t.reward >= min_reward for t in g.trajectories)

    per_group = [[t for t in g.trajectories if t.reward < min_reward and not t.error and t.turns]
                 for g in sorted(groups, key=successes)]  # sorted() is stable: ties keep their order
    out: list[Trajectory] = []
    ranks = 1 if one_per_task else max((len(f) for f in per_group), default=0)
    for rank in range(ranks):
        out += [f[rank] for f in per_group if rank < len(f)]
    return out[:limit]
