"""Tool-match reward (ToolRL): did the policy call the right tools with the right arguments?

Against `task.meta["reference_calls"]` (a list of {"name", "arguments"}): each reference call is
matched to the predicted call of the same name that agrees on the most arguments (each predicted
call used once); a matched call earns 1/3 for the name, 1/3 for the argument keys (Jaccard) and 1/3
for the values (the fraction of reference arguments with an equal value). The sum is divided by
max(#reference, #predicted) calls, so extra calls cost as much as missing ones.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from agentic_rl.rewards.base import Score
from agentic_rl.types import Task, ToolCall, Trajectory


def call_match(ref: Mapping, pred: ToolCall) -> float:
    if ref["name"] != pred.name:
        return 0.0
    ref_args, pred_args = dict(ref.get("arguments", {})), dict(pred.arguments)
    keys = set(ref_args) | set(pred_args)
    jaccard = len(set(ref_args) & set(pred_args)) / len(keys) if keys else 1.0
    values = sum(_same(ref_args[k], pred_args.get(k)) for k in ref_args) / len(ref_args) if ref_args else 1.0
    return (1.0 + jaccard + values) / 3.0


def _same(a, b) -> bool:
    if isinstance(a, str) and isinstance(b, str):
        return "".join(a.split()) == "".join(b.split())  # "2 * 3" and "2*3" are the same argument
    return a == b


def tool_match(reference: Sequence[Mapping], predicted: Sequence[ToolCall]) -> float:
    if not reference and not predicted:
        return 1.0
    free = list(predicted)
    total = 0.0
    for ref in reference:
        best = max(free, key=lambda p: call_match(ref, p), default=None)
        if best is not None and call_match(ref, best) > 0:
            total += call_match(ref, best)
            free.remove(best)
    return total / max(len(reference), len(predicted))


@dataclass(frozen=True)
class ToolMatchReward:
    def __call__(self, task: Task, trajectory: Trajectory) -> Score:
        reference = task.meta.get("reference_calls")
        if reference is None:
            return Score(0.0, {"no_reference": 1.0})
        predicted = [c for turn in trajectory.turns for c in turn.tool_calls]
        return Score(tool_match(reference, predicted), {"calls": float(len(predicted))})
