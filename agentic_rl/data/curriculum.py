"""Task selection: the mixes of `sft.mix` / `rl.tasks.mix`, and the RL task samplers (which training tasks
the next step rolls out).

A group whose samples all succeed or all fail has zero reward spread and teaches GRPO nothing, yet
its rollout costs as much as any other. `PassRateCurriculum` tracks the pass rate of each *kind* of
task (a meta field such as the calculator's template, or the task id) and draws kinds with weight

    w_k = p_k (1 - p_k) + floor,     p_k = (successes_k + 1) / (attempts_k + 2)

— the Bernoulli variance of the reward, which is largest at p = 1/2, so tasks the policy already
solves and tasks it cannot solve yet are drawn less, but never not at all (the floor). This is the online
difficulty filtering of e.g. Bae et al. 2025 ("Online Difficulty Filtering for Reasoning Oriented
RL") and the variance criterion of RAGEN's StarPO-S, applied before sampling instead of after.
Pass-rate counts decay by `decay` per update, so a kind the policy has learned falls out of focus.

`FailureRateCurriculum` keeps the pool's own shares (`rl.tasks.mix`) and tilts them toward the kinds the
policy still fails: kind k is drawn with weight n_k ((1 - p_k) + floor), n_k its count in the pool.
Unlike p(1 - p) it does not starve a kind the policy cannot solve yet — with hindsight
demonstrations such a kind's failures are a training signal too — while solved kinds fall to the
floor instead of taking their share of every step.

A sample counts as a success when its reward reaches `threshold` (the calculator's correct answer
scores 1.0, a well-formed wrong one 0.1). Samplers draw from a fixed pool of tasks and never repeat a task until the pool is used up. Their
state is a plain dict (`state_dict` / `load_state_dict`) for checkpoints.
"""

from __future__ import annotations

import collections
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from agentic_rl.registry import Registry
from agentic_rl.types import Task, TrajectoryGroup

# sft.mix and rl.tasks.mix pick from a stream this many times longer than they need: enough of any
# share a recipe sets
MIX_STRETCH = 40

SAMPLERS: Registry[Callable[..., TaskSampler]] = Registry("task sampler")


def register_sampler(name: str):
    return SAMPLERS.register(name)


def mixed_pool(tasks: Callable[[str, int, int], list[Task]], splits: Sequence[str], n: int, seed: int) -> list[Task]:
    """`n` tasks from several splits in equal shares, interleaved so that any prefix keeps the shares
    (`tasks` is an env's `tasks(split, n, seed)`). One split gives exactly that split's tasks."""
    k = len(splits)
    per_split = [tasks(split, -(-n // k), seed) for split in splits]
    return [per_split[i % k][i // k] for i in range(n)]


def mixed_tasks(tasks: Sequence[Task], key: str, weights: Mapping[str, float], n: int) -> list[Task]:
    """`n` of `tasks` in the shares `weights` gives the values of `task.meta[key]` (a task whose value
    has no weight is skipped), keeping the tasks' order.

    The counts are the largest-remainder rounding of n x share, so they always add up to n. The
    chosen tasks are interleaved in proportion (the value furthest behind its share comes next), so
    any prefix of the list keeps the mix. Raises if `tasks` holds too few of a value.
    """
    total = sum(weights.values())
    if n <= 0 or total <= 0:
        return []
    exact = {v: n * w / total for v, w in weights.items()}
    counts = {v: int(x) for v, x in exact.items()}
    for v in sorted(exact, key=lambda v: counts[v] - exact[v])[: n - sum(counts.values())]:
        counts[v] += 1
    by_value: dict[str, list[Task]] = {v: [] for v in weights}
    for t in tasks:
        v = str(t.meta.get(key))
        if v in by_value and len(by_value[v]) < counts[v]:
            by_value[v].append(t)
    short = [v for v in weights if len(by_value[v]) < counts[v]]
    if short:
        raise ValueError(f"mix: only {len(by_value[short[0]])} of {counts[short[0]]} tasks with "
                         f"{key} = {short[0]!r} in the pool")
    out: list[Task] = []
    taken = dict.fromkeys(weights, 0)
    while len(out) < n:
        v = max((v for v in weights if taken[v] < counts[v]), key=lambda v: counts[v] / n * (len(out) + 1) - taken[v])
        out.append(by_value[v][taken[v]])
        taken[v] += 1
    return out


def make_sampler(name: str, pool: Sequence[Task], seed: int, **options: Any) -> TaskSampler:
    return SAMPLERS.get(name)(pool, seed=seed, **options)


class TaskSampler:
    """Draws tasks from `pool` in order; subclasses choose which."""

    def __init__(self, pool: Sequence[Task], seed: int = 0):
        if not pool:
            raise ValueError("a task sampler needs a non-empty pool")
        self.pool = list(pool)
        self.used: set[int] = set()
        self.rng = random.Random(seed)

    def sample(self, n: int) -> list[Task]:
        return [self._next(self._unused()) for _ in range(n)]

    def update(self, groups: Iterable[TrajectoryGroup]) -> None:
        """Called with each step's scored groups."""

    def metrics(self) -> dict[str, float]:
        """What the sampler believes, for metrics.jsonl."""
        return {}

    def _unused(self) -> list[int]:
        if len(self.used) >= len(self.pool):  # pool exhausted: start a new pass over it
            self.used.clear()
        return [i for i in range(len(self.pool)) if i not in self.used]

    def _next(self, candidates: list[int]) -> Task:
        i = candidates[0]
        self.used.add(i)
        return self.pool[i]

    def state_dict(self) -> dict:
        return {"used": sorted(self.used), "rng": self.rng.getstate()}

    def load_state_dict(self, state: dict) -> None:
        self.used = set(state["used"])
        version, internal, gauss = state["rng"]
        self.rng.setstate((version, tuple(internal), gauss))


@register_sampler("uniform")
class UniformSampler(TaskSampler):
    """The pool in its own order (a generator's pool is already a random stream)."""


@register_sampler("pass_rate")
class PassRateCurriculum(TaskSampler):
    def __init__(self, pool: Sequence[Task], seed: int = 0, key: str = "template", floor: float = 0.02,
                 decay: float = 0.9, threshold: float = 1.0):
        super().__init__(pool, seed)
        self.key, self.floor, self.decay, self.threshold = key, floor, decay, threshold
        self.successes: dict[str, float] = {}
        self.attempts: dict[str, float] = {}

    def kind(self, task: Task) -> str:
        return str(task.meta.get(self.key, task.id))

    def pass_rate(self, kind: str) -> float:
        return (self.successes.get(kind, 0.0) + 1) / (self.attempts.get(kind, 0.0) + 2)

    def weight(self, kind: str) -> float:
        p = self.pass_rate(kind)
        return p * (1 - p) + self.floor

    def _next(self, candidates: list[int]) -> Task:
        by_kind: dict[str, list[int]] = {}
        for i in candidates:
            by_kind.setdefault(self.kind(self.pool[i]), []).append(i)
        kinds = sorted(by_kind)
        chosen = self.rng.choices(kinds, weights=[self.weight(k) for k in kinds])[0]
        return super()._next(by_kind[chosen])

    def update(self, groups: Iterable[TrajectoryGroup]) -> None:
        for k in self.attempts:
            self.attempts[k] *= self.decay
            self.successes[k] *= self.decay
        for g in groups:
            k = self.kind(g.task)
            self.attempts[k] = self.attempts.get(k, 0.0) + len(g.trajectories)
            self.successes[k] = self.successes.get(k, 0.0) + sum(t.reward >= self.threshold for t in g.trajectories)

    def metrics(self) -> dict[str, float]:
        return {f"pass_rate/{k}": round(self.pass_rate(k), 4) for k in sorted(self.attempts)}

    def state_dict(self) -> dict:
        return {**super().state_dict(), "successes": dict(self.successes), "attempts": dict(self.attempts)}

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        self.successes, self.attempts = dict(state["successes"]), dict(state["attempts"])


@register_sampler("failure_rate")
class FailureRateCurriculum(PassRateCurriculum):
    def __init__(self, pool: Sequence[Task], seed: int = 0, key: str = "template", floor: float = 0.1,
                 decay: float = 0.9, threshold: float = 1.0):
        super().__init__(pool, seed, key, floor, decay, threshold)
        self.share = collections.Counter(self.kind(t) for t in self.pool)

    def weight(self, kind: str) -> float:
        return self.share[kind] * (1 - self.pass_rate(kind) + self.floor)
