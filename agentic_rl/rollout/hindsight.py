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
   prompt, the kept turns, the teacher's turns — in the same token layout as SFT and RL
   (`conversation_trajectory`), tagged with its provenance (task meta `provenance: hindsight`,
   `source_task`, `failure_turn`, `hint`), ready to be trained on as an SFT target.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from agentic_rl.engines.base import Engine, SamplingParams
from agentic_rl.envs.base import Env, close_env
from agentic_rl.rewards.scoring import score_groups
from agentic_rl.rollout.demos import conversation_trajectory
from agentic_rl.rollout.loop import Budget, rollout
from agentic_rl.types import Task, Trajectory


def failure_point(t: Trajectory) -> int:
    """Index of the first turn with a failed or malformed tool call, else of the last turn."""
    for k, turn in enumerate(t.turns):
        if turn.tool_errors or turn.malformed_calls:
            return k
    return max(len(t.turns) - 1, 0)


def hint(t: Trajectory, reveal_answer: bool) -> str:
    """What went wrong, in words a model can use."""
    parts = [f"The tool returned an error: {turn.observation.strip()[:300]}"
             for turn in t.turns if turn.tool_errors or turn.malformed_calls]
    if not t.reward_details.get("correct", 0.0):
        last = t.turns[-1].action_text.strip()[-200:] if t.turns else ""
        parts.append(f"The previous attempt ended with {last!r}, which was judged wrong.")
    if reveal_answer:
        parts.append(f"The correct final answer is {t.task.answer}.")
    return "Hint (from a review of an earlier attempt): " + " ".join(parts)


def replay(env: Env, task: Task, actions: Sequence[str]) -> list[dict]:
    """The conversation a fresh env gives for `actions`: its prompt, then each action and the
    observation messages it returns (deterministic envs give back exactly the student's context)."""
    messages = list(env.reset(task))
    for action in actions:
        result = env.step(action)
        messages += [{"role": "assistant", "content": action}, *[dict(m) for m in result.observation]]
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
class HindsightResult:
    corrections: list[Trajectory]  # verified, on the student's context without the hint
    attempts: int


def hindsight_corrections(
    engine: Engine, tokenizer, make_env: Callable[[], Env], reward_fn, failed: Sequence[Trajectory],
    params: SamplingParams, budget: Budget, reveal_answer: bool = True, min_reward: float = 1.0, seed: int = 0,
) -> HindsightResult:
    """Verified corrections of `failed` written by `engine` (the teacher)."""
    if not failed:
        return HindsightResult([], 0)
    plans = [(t, failure_point(t), hint(t, reveal_answer)) for t in failed]
    envs = iter([HintedEnv(make_env(), [turn.action_text for turn in t.turns[:k]], h) for t, k, h in plans])
    groups, _ = rollout(engine, tokenizer, lambda: next(envs), [t.task for t, _, _ in plans], 1, params, budget,
                        seed=seed)
    groups = score_groups(reward_fn, groups, budget.step_timeout_s)
    kept = []
    for (t, k, h), g in zip(plans, groups):
        fix = g.trajectories[0]
        if fix.error or fix.reward < min_reward or not fix.terminated:
            continue
        actions = [turn.action_text for turn in t.turns[:k]] + [turn.action_text for turn in fix.turns]
        kept.append(_as_student_target(make_env, t.task, actions, k, h, tokenizer))
    return HindsightResult(kept, len(plans))


def _as_student_target(make_env, task: Task, actions: Sequence[str], k: int, h: str, tokenizer) -> Trajectory:
    env = make_env()
    try:
        messages = replay(env, task, actions)
        tagged = Task(task.id, task.prompt, task.answer, {**task.meta, "provenance": "hindsight",
                                                          "source_task": task.id, "failure_turn": k, "hint": h})
        return conversation_trajectory(tagged, messages, env.tool_schemas, env.format, tokenizer)
    finally:
        close_env(env)


def failed_episodes(groups, min_reward: float, limit: int) -> list[Trajectory]:
    """Up to `limit` failures of the step (episodes that ended in an env error are not corrected)."""
    out = [t for g in groups for t in g.trajectories if t.reward < min_reward and not t.error and t.turns]
    return out[:limit]

