"""Higher-order action synthesis (AgentFounder, Su et al. 2025): contrastive decision items from
trajectories an agent already has, failed ones included.

Episodes of one task that took the same actions up to some turn shared the same decision there; where
they then took different actions and ended differently, the decision had a better and a worse
answer, and the outcomes say which. The episodes of a task form a tree of histories
(`decision_points`): at every node with two or more distinct next actions whose episodes' mean
rewards differ, one item shows the history so far, the actions as lettered choices (in an order
drawn from the seed), the choice that led to the best outcome, and every choice's outcome (its mean
reward and episode count): the causal signal. Items are next-token training text for `cpt:`.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from agentic_rl.types import Trajectory


@dataclass(frozen=True, kw_only=True)
class DecisionPoint:
    task_id: str
    prompt: str
    history: tuple[tuple[str, str], ...]  # (action, observation) of the turns before the decision
    choices: tuple[tuple[str, float, int], ...]  # (action, mean reward of the episodes that took it, episodes)


def decision_points(trajectories: Sequence[Trajectory], min_gap: float = 0.5) -> list[DecisionPoint]:
    """Every history shared by episodes of one task after which they acted differently and the best
    next action's mean reward beats the worst's by at least `min_gap`."""
    by_task: dict[str, list[Trajectory]] = defaultdict(list)
    for t in trajectories:
        if t.infra_failure is None and t.turns:
            by_task[t.task.id].append(t)
    out = []
    for task_id, episodes in by_task.items():
        depth = max(len(t.turns) for t in episodes)
        for k in range(depth):
            nodes: dict[tuple, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
            for t in episodes:
                if len(t.turns) > k:
                    nodes[_history(t, k)][t.turns[k].action_text].append(t.reward)
            for history, actions in nodes.items():
                means = {a: sum(r) / len(r) for a, r in actions.items()}
                if len(means) >= 2 and max(means.values()) - min(means.values()) >= min_gap:
                    out.append(DecisionPoint(task_id=task_id, prompt=episodes[0].task.prompt, history=history,
                                             choices=tuple((a, means[a], len(actions[a])) for a in sorted(actions))))
    return out


def _history(t: Trajectory, k: int) -> tuple[tuple[str, str], ...]:
    return tuple((turn.action_text, turn.observation) for turn in t.turns[:k])


LETTERS = "ABCDEFGH"


def item_text(point: DecisionPoint, rng: random.Random, max_choices: int = 4) -> str:
    """The decision as a multiple-choice item with its answer and every choice's outcome."""
    best = max(point.choices, key=lambda c: (c[1], c[2]))
    others = [c for c in point.choices if c is not best]
    rng.shuffle(others)
    choices = [best, *others[: max_choices - 1]]
    rng.shuffle(choices)
    lines = [f"Task: {point.prompt}"]
    for n, (action, observation) in enumerate(point.history, 1):
        lines += [f"Step {n} action: {action}", f"Step {n} observation: {observation}"]
    lines.append(f"Which action should come next (step {len(point.history) + 1})?")
    lines += [f"{LETTERS[i]}. {action}" for i, (action, _, _) in enumerate(choices)]
    right = LETTERS[choices.index(best)]
    outcomes = "; ".join(f"{LETTERS[i]} led to a mean reward of {mean:.2f} over {n} episode{'s' * (n > 1)}"
                         for i, (_, mean, n) in enumerate(choices))
    lines += [f"Answer: {right}", f"Outcome: {outcomes}."]
    return "\n".join(lines)


def synthesize(trajectories: Sequence[Trajectory], seed: int = 1, min_gap: float = 0.5,
               max_choices: int = 4) -> list[str]:
    rng = random.Random(f"has/{seed}")
    return [item_text(p, rng, max_choices) for p in decision_points(trajectories, min_gap)]
