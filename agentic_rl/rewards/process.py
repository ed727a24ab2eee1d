"""Process rewards: a reward per turn (the action, read with its observation), set on `Turn.reward`.

The advantage estimators credit a turn's reward to that turn and the turns before it (reward-to-go
over sampled tokens, centred within the task's group; `algorithms/advantages.py`), so a penalty for
a bad tool call lowers the advantage of exactly the tokens up to that call.

`PROCESS_REWARDS` names them for recipes (`rl.process_reward`): `step_signals` and `milestones`,
rule-based and free.
A judge or PRM scores turns through `JudgeTurns` (`rewards/judge.py`).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from agentic_rl.algorithms.registry import Registry
from agentic_rl.rewards.grounding import grounded
from agentic_rl.types import Trajectory, TrajectoryGroup

PROCESS_REWARDS: Registry = Registry("process reward")
EMPTY_RESULTS = ("No results.", "(no output: print() the values you need)")


@dataclass(frozen=True)
class StepSignals:
    """Rule-based step penalties: a turn whose calls failed (malformed, unknown tool, bad arguments,
    raised), a call identical to an earlier one in the episode (looping), a search or program that
    returned nothing. Summed per turn; a clean turn gets 0."""

    tool_error: float = -0.1
    repeated_call: float = -0.1
    empty_result: float = -0.05

    def __call__(self, trajectory: Trajectory) -> list[float]:
        seen: set[str] = set()
        rewards = []
        for turn in trajectory.turns:
            r = self.tool_error * min(turn.tool_errors, 1)
            for call in turn.tool_calls:
                key = call.name + json.dumps(dict(call.arguments), sort_keys=True)
                r += self.repeated_call * (key in seen)
                seen.add(key)
            r += self.empty_result * (turn.tool_calls != () and turn.observation.strip() in EMPTY_RESULTS)
            rewards.append(r)
        return rewards


PROCESS_REWARDS.register("step_signals")(StepSignals())


@dataclass(frozen=True)
class Milestones:
    """Credit for reaching the reference solution's intermediate results: `weight` on the first turn
    whose tool output holds one of the task's `meta["milestones"]` (a value the reference passes
    through on the way to the answer, e.g. 816 in "16 bags of 51 apples shared by 4 shops"). The
    value must come out of a tool (`rewards.grounding.grounded`), so writing it down, or asking the
    tool to echo it, earns nothing; each milestone pays once.

    Why: on a multi-step task a small policy may almost never finish, and outcome-only GRPO then
    sees groups that all fail. A sample that gets the first step right is better than one that does
    not, and this says so. Tasks without milestones get 0 on every turn."""

    weight: float = 0.5

    def __call__(self, trajectory: Trajectory) -> list[float]:
        pending = [str(v) for v in trajectory.task.meta.get("milestones", ())]
        rewards = []
        for turn in trajectory.turns:
            reached = [v for v in pending if grounded(v, [turn])]
            pending = [v for v in pending if v not in reached]
            rewards.append(self.weight * len(reached))
        return rewards


PROCESS_REWARDS.register("milestones")(Milestones())


def with_turn_rewards(trajectory: Trajectory, rewards: Sequence[float]) -> Trajectory:
    if len(rewards) != len(trajectory.turns):
        raise ValueError(f"{len(rewards)} turn rewards for {len(trajectory.turns)} turns")
    turns = tuple(dataclasses.replace(t, reward=float(r)) for t, r in zip(trajectory.turns, rewards))
    return dataclasses.replace(trajectory, turns=turns)


def apply_process_rewards(fn: Callable[[Trajectory], list[float]], groups: Sequence[TrajectoryGroup]
                          ) -> list[TrajectoryGroup]:
    """Every trajectory with its per-turn rewards (and their sum logged in `reward_details`)."""
    out = []
    for g in groups:
        trajs = []
        for t in g.trajectories:
            rewards = fn(t)
            t = with_turn_rewards(t, rewards)
            trajs.append(dataclasses.replace(t, reward_details={**t.reward_details, "process": sum(rewards)}))
        out.append(TrajectoryGroup(g.task, tuple(trajs)))
    return out
