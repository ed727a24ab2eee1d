"""Process rewards: a reward per turn (the action, read with its observation), set on `Turn.reward`.

The advantage estimators credit a turn's reward to that turn and the turns before it (reward-to-go
over sampled tokens, centred within the task's group; `algorithms/advantages.py`), so a penalty for
a bad tool call lowers the advantage of exactly the tokens up to that call.

`PROCESS_REWARDS` names them for recipes (`rl.algorithm.process_reward`): `step_signals`, `milestones` and
`operands`, rule-based and free; names joined by "+" (`step_signals+operands`) add up turn by turn.
A judge or PRM scores turns through `JudgeTurns` (`rewards/judge.py`).
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from agentic_rl.registry import Registry
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


_NUMBER = re.compile(r"\d+(?:\.\d+)?")


def numbers(text: str) -> Counter:
    """The unsigned numbers written in `text`, as floats (so 438 and 438.0 are one value)."""
    return Counter(float(n) for n in _NUMBER.findall(text))


@dataclass(frozen=True)
class Operands:
    """Grounded operands for word problems: a call may use only numbers the problem states or an
    earlier tool returned, each no more often than it appears there (`unsourced`, on the calling
    turn, once a turn); every number the problem states must reach some call (`unused`, on the last
    turn, once an episode). A retry may use the same numbers again: each call is checked alone.

    Why: a small policy's wrong calculator calls are mostly ungrounded. Seen in greedy held-out
    failures after GRPO: a product done in the head ("55400 - 55500"), a number used for two
    ("222 * 222", "(6570 / 15) * 6570"), a factor left out ("55 - 171" for 8 trays of 55), and the
    answer guessed first and then echoed ("249"). Outcome reward ranks these no lower than a
    grounded wrong call, and gives a group where every sample fails no gradient at all.
    Assumes the problem states only numbers its solution needs (true of the calculator templates);
    for problems with distractor numbers set `unused` to 0."""

    unsourced: float = -0.25
    unused: float = -0.25

    def __call__(self, trajectory: Trajectory) -> list[float]:
        stated = numbers(trajectory.task.prompt)
        available, reached, rewards = Counter(stated), set(), []
        for turn in trajectory.turns:
            r = 0.0
            for call in turn.tool_calls:
                used = numbers(" ".join(str(v) for v in call.arguments.values()))
                reached.update(used)
                if used - available:
                    r = self.unsourced
            available += numbers(turn.observation)  # a result may feed a later call
            rewards.append(r)
        if rewards and stated.keys() - reached:
            rewards[-1] += self.unused
        return rewards


PROCESS_REWARDS.register("operands")(Operands())


def process_reward(name: str, judge=None, judge_weight: float = 0.2) -> Callable[[Trajectory], list[float]]:
    """The registered process reward `name`, or the turn-by-turn sum of "a+b+…"; `judge` (an
    `LLMJudge`) grades each turn for the name `judge` (`JudgeTurns`)."""
    def one(n: str):
        if n != "judge":
            return PROCESS_REWARDS.get(n)
        if judge is None:
            raise KeyError("process reward 'judge' needs reward.judge (a model or a URL)")
        from agentic_rl.rewards.judge import JudgeTurns

        return JudgeTurns(judge, judge_weight)

    parts = [one(n.strip()) for n in name.split("+")]
    if len(parts) == 1:
        return parts[0]
    return lambda t: [sum(rs) for rs in zip(*(p(t) for p in parts))]


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
