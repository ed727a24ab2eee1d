"""The recipe's `reward:` section: named components with weights and gates, minus weighted penalties.

    R = sum_i  w_i * c_i * [gate_i passed]  -  sum_j  p_j * h_j

Each component `c_i` is a value in [0, 1] per episode, from `REWARD_COMPONENTS`: the env's outcome
(its verifier's `correct`), format, tool match (ToolRL, Qian et al. 2025), self-consistency across
the group (TTRL, Zuo et al. 2025) and confidence (self-certainty). A term with a gate counts only
on the episodes where the gate's component passed (counted, and above 0). Each penalty `h_j` is a
0/1 reward-hacking flag from `HACKING_DETECTORS` (`rewards/hacking.py`).

The ToolRL rule — shaping never outweighs a correct outcome — is enforced by `check_reward`: the
terms that can pay on an episode whose outcome failed (those whose gates do not lead to `outcome`)
weigh less together than the outcome. So of two episodes with the same penalties, one solved and
one not, the solved one scores higher, for every weight a recipe may set
(tests/rewards/test_compose.py proves it with hypothesis).

Every component's value, every penalty's flag and the env's own details land in the score's
`details`, so each step logs them as `reward/<name>` (`monitor/metrics.py::reward_components`).
An empty section leaves the env's reward as it is (`composed_reward` returns it unchanged).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from agentic_rl.registry import Registry
from agentic_rl.rewards.base import RewardFn, Score, new_step, step_metrics
from agentic_rl.rewards.hacking import HACKING_DETECTORS
from agentic_rl.rewards.rubric import FormatScore
from agentic_rl.rewards.tool_match import ToolMatchReward
from agentic_rl.rewards.unsupervised import Confidence, SelfConsistency
from agentic_rl.types import TrajectoryGroup

OUTCOME = "outcome"

# A component scores a group: (the group, the env reward's score of each of its episodes) -> a value
# in [0, 1] per episode. One signature for all: a group term (self-consistency) needs the group.
Component = Callable[[TrajectoryGroup, Sequence[Score]], list[float]]
REWARD_COMPONENTS: Registry[Component] = Registry("reward component")


def _outcome(group: TrajectoryGroup, env: Sequence[Score]) -> list[float]:
    """The env verifier's `correct` (what accuracy reads), else its value."""
    return [s.details.get("correct", s.value) for s in env]


def _format(group: TrajectoryGroup, env: Sequence[Score]) -> list[float]:
    """The env's own well-formedness (its reward's `format` detail: a code block for code, an answer
    tag elsewhere), else `FormatScore`'s answer tag and clean calls."""
    return [s.details["format"] if "format" in s.details else FormatScore()(group.task, t).value
            for t, s in zip(group.trajectories, env)]


def _per_episode(fn: RewardFn) -> Component:
    return lambda group, env: [fn(group.task, t).value for t in group.trajectories]


REWARD_COMPONENTS.register(OUTCOME)(_outcome)
REWARD_COMPONENTS.register("format")(_format)
REWARD_COMPONENTS.register("tool_match")(_per_episode(ToolMatchReward()))
REWARD_COMPONENTS.register("confidence")(_per_episode(Confidence()))
REWARD_COMPONENTS.register("self_consistency")(lambda group, env: [s.value for s in SelfConsistency().score_group(group)])


@REWARD_COMPONENTS.register("judge")
def _judge(group: TrajectoryGroup, env: Sequence[Score]) -> list[float]:
    """An LLM judge's score: bound to the run's judge (`reward.judge`) when the reward is built."""
    raise ValueError("the judge component needs reward.judge (a model or a URL)")


class Weighted(Protocol):
    """A component or penalty of the section, by name (`trainer.reward_config.RewardTermConfig`)."""

    name: str
    weight: float
    gate: str  # "" = none


def check_reward(components: Sequence[Weighted], penalties: Sequence[Weighted]) -> None:
    """Raises ValueError (naming the entry, listing the known names) unless every name exists, each
    gate names another component without a cycle, weights are >= 0, and the ToolRL bound holds."""
    names = [c.name for c in components]
    for where, entries, registry in (("components", components, REWARD_COMPONENTS), ("penalties", penalties, HACKING_DETECTORS)):
        for i, e in enumerate(entries):
            if e.name not in registry:
                raise ValueError(f"{where}[{i}].name: unknown {registry.kind} {e.name!r}; known: {', '.join(registry.names())}")
            if e.weight < 0:
                raise ValueError(f"{where}[{i}].weight must be >= 0 (a penalty is subtracted by its own list)")
            if where == "penalties" and e.gate:
                raise ValueError(f"penalties[{i}].gate: a penalty takes no gate (it counts on every episode)")
    if len(set(names)) != len(names) or len({p.name for p in penalties}) != len(penalties):
        raise ValueError(f"a name appears twice in components {names} or penalties")
    if penalties and not components:
        raise ValueError("penalties: are subtracted from the components; name the components too (e.g. outcome)")
    for i, c in enumerate(components):
        if c.gate and (c.gate not in names or c.gate == c.name):
            raise ValueError(f"components[{i}].gate: {c.gate!r} is not another component; components: {', '.join(names)}")
        _gate_chain(c, components)  # raises on a cycle
    _check_bound(components)


def _gate_chain(term: Weighted, components: Sequence[Weighted]) -> list[str]:
    """The gates `term` waits on, nearest first."""
    by_name, chain, gate = {c.name: c for c in components}, [], term.gate
    while gate:
        if gate in chain or gate == term.name:
            raise ValueError(f"components: the gates of {term.name!r} form a cycle ({' -> '.join([term.name, *chain, gate])})")
        chain.append(gate)
        gate = by_name[gate].gate
    return chain


def _check_bound(components: Sequence[Weighted]) -> None:
    """The terms that can pay when the outcome fails weigh less, together, than the outcome."""
    outcome = next((c for c in components if c.name == OUTCOME), None)
    if outcome is None:
        return  # no outcome to outrank (an unsupervised reward, TTRL's)
    if outcome.gate:
        raise ValueError("components: outcome: the outcome takes no gate (the other terms gate on it)")
    if not outcome.weight > 0:
        raise ValueError("components: outcome: weight must be > 0")
    free = [c for c in components if c.name != OUTCOME and OUTCOME not in _gate_chain(c, components)]
    total = sum(c.weight for c in free)
    if free and not total < outcome.weight:
        listed = " + ".join(f"{c.name} {c.weight:g}" for c in free)
        raise ValueError(f"components: the terms that pay on a failed episode weigh {listed} = {total:g}, not less than "
                         f"outcome's {outcome.weight:g}: shaping could outweigh a correct answer (ToolRL's rule); "
                         "lower them, or gate them on outcome")


def combine(values: Mapping[str, float], components: Sequence[Weighted], penalties: Sequence[Weighted]) -> float:
    """R for one episode from its components' values (in [0, 1]) and its penalties' flags (0/1)."""
    by_name = {c.name: c for c in components}
    memo: dict[str, bool] = {}

    def counts(name: str) -> bool:  # the term's gate passed (or it has none)
        gate = by_name[name].gate
        return not gate or passes(gate)

    def passes(name: str) -> bool:
        if name not in memo:
            memo[name] = counts(name) and values[name] > 0
        return memo[name]

    # a value outside [0, 1] (a misbehaving component) is clipped: the bound assumes the range
    total = sum(c.weight * min(max(values[c.name], 0.0), 1.0) for c in components if counts(c.name))
    return total - sum(p.weight * values[p.name] for p in penalties)


@dataclass(frozen=True)
class ComposedReward:
    """The env's reward, recomposed by the section: a group reward (`score_groups` calls
    `score_group`; one episode alone is a group of one)."""

    env: RewardFn
    components: tuple[Weighted, ...]
    penalties: tuple[Weighted, ...] = ()
    bound: Mapping[str, Component] = field(default_factory=dict)  # components built for this run (the judge)

    def __call__(self, task, trajectory) -> Score:
        return self.score_group(TrajectoryGroup(task, (trajectory,)))[0]

    def score_group(self, group: TrajectoryGroup) -> list[Score]:
        if hasattr(self.env, "score_group"):
            env = list(self.env.score_group(group))
        else:
            env = [self.env(group.task, t) for t in group.trajectories]
        columns = {c.name: (self.bound.get(c.name) or REWARD_COMPONENTS.get(c.name))(group, env) for c in self.components}
        columns |= {p.name: [float(HACKING_DETECTORS.get(p.name)(group.task, t)) for t in group.trajectories]
                    for p in self.penalties}
        out = []
        for i, s in enumerate(env):
            values = {name: float(col[i]) for name, col in columns.items()}
            details = {**s.details, **values, "correct": s.details.get("correct", float(s.value >= 1.0))}
            out.append(Score(combine(values, self.components, self.penalties), details, s.cost, s.error))
        return out

    def prepare(self, groups) -> None:
        """A judge (in the env's reward, or the section's) grades the whole step in one batch."""
        for part in (self.env, *self.bound.values()):
            if hasattr(part, "prepare"):
                part.prepare(groups)

    def new_step(self) -> None:
        new_step(self.env)

    def step_metrics(self) -> dict[str, float]:
        return step_metrics(self.env)


def composed_reward(env: RewardFn, components: Sequence[Weighted], penalties: Sequence[Weighted] = (),
                    bound: Mapping[str, Component] | None = None) -> RewardFn:
    """`env` itself when the section is empty; else the checked composition (`bound`: components built
    for the run, by name)."""
    if not components and not penalties:
        return env
    check_reward(components, penalties)
    return ComposedReward(env, tuple(components), tuple(penalties), dict(bound or {}))
