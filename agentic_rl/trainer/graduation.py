"""The SFT graduation report: is the model ready for RL? (SFT should stop at "good enough": loss
converged, format right at least 90% of the time, outputs still diverse; over-SFT leaves RL little to
work with.)

Three criteria, each measured, not assumed:
  converged   the training loss no longer falls much: over the last window of steps, the fitted
              line's drop is under `max_drop` of the window's mean loss;
  format      on held-out prompts, greedy episodes end with an answer tag and every tool call
              parses and runs: at least `min_format` of them;
  diverse     sampled outputs of one prompt (temperature 1) still differ: mean pairwise similarity
              (difflib ratio; 1 = identical) at most `max_similarity`. Over-SFT collapses it, and a
              group of identical samples gives GRPO no signal.
Tool-call accuracy (calls that parse and run) and distinct-2 are reported alongside.
"""

from __future__ import annotations

import difflib
import itertools
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace

from agentic_rl.rewards.scoring import score_groups
from agentic_rl.rollout.loop import rollout
from agentic_rl.trainer.episodes import episodes
from agentic_rl.types import TrajectoryGroup


@dataclass(frozen=True)
class Graduation:
    loss_window_drop: float | None  # fraction the fitted loss fell over the last window (None: too few steps)
    format_rate: float
    tool_call_accuracy: float  # calls that parsed and ran / all calls
    accuracy: float
    pairwise_similarity: float
    distinct_2: float
    converged: bool
    formatted: bool
    diverse: bool

    @property
    def graduated(self) -> bool:
        return self.converged and self.formatted and self.diverse

    def to_dict(self) -> dict:
        return {**asdict(self), "graduated": self.graduated}

    def summary(self) -> str:
        mark = lambda ok: "pass" if ok else "FAIL"  # noqa: E731
        return (f"graduation: {'GRADUATED' if self.graduated else 'NOT READY'} | "
                f"loss converged {mark(self.converged)} (last-window drop "
                f"{'n/a' if self.loss_window_drop is None else f'{self.loss_window_drop:.1%}'}) | "
                f"format {mark(self.formatted)} ({self.format_rate:.0%}; tool calls ok {self.tool_call_accuracy:.0%}) | "
                f"diversity {mark(self.diverse)} (pairwise similarity {self.pairwise_similarity:.2f}, "
                f"distinct-2 {self.distinct_2:.2f}) | accuracy {self.accuracy:.0%}")


def window_drop(losses: Sequence[float], window: int) -> float | None:
    """Fit a line to the last `window` losses; its drop across the window over their mean. None with
    fewer than 3 steps: convergence cannot be told."""
    ys = list(losses)[-window:]
    if len(ys) < 3:
        return None
    slope = statistics.linear_regression(range(len(ys)), ys).slope
    return -slope * (len(ys) - 1) / max(statistics.fmean(ys), 1e-9)


def distinct_n(texts: Sequence[str], n: int = 2) -> float:
    grams = [tuple(t.split()[i : i + n]) for t in texts for i in range(max(len(t.split()) - n + 1, 0))]
    return len(set(grams)) / len(grams) if grams else 0.0


def pairwise_similarity(texts: Sequence[str]) -> float:
    pairs = list(itertools.combinations(texts, 2))
    return statistics.fmean(difflib.SequenceMatcher(None, a, b).ratio() for a, b in pairs) if pairs else 1.0


def graduation_report(engine, tokenizer, spec, cfg, losses: Sequence[float],
                       evaluated: Sequence[TrajectoryGroup] = ()) -> Graduation:
    """`evaluated`: the same model's scored greedy episodes on the first eval split (the held-out
    evaluation after SFT). When they open with the report's prompts, the format check reads them
    instead of decoding those prompts a second time."""
    s = cfg.sft
    greedy = episodes(spec, cfg.env.options, cfg.rollout, temperature=0.0, concurrent=False)
    tasks = spec.tasks(cfg.eval.splits[0], s.graduation_prompts, cfg.eval.seed)
    scored = list(evaluated[: len(tasks)])
    if [g.task.id for g in scored] != [t.id for t in tasks]:
        out, _ = rollout(engine, greedy.make_env, tasks, 1, greedy.params, greedy.budget)
        scored = score_groups(greedy.reward, out)
    trajs = [t for g in scored for t in g.trajectories]
    sampled, _ = rollout(engine, greedy.make_env, tasks[: s.diversity_prompts], s.diversity_samples,
                         replace(greedy.params, temperature=1.0), greedy.budget, seed=cfg.seed)
    texts = [[" | ".join(turn.action_text for turn in t.turns) for t in g.trajectories] for g in sampled]
    calls = sum(t.num_tool_calls for t in trajs)
    drop = window_drop(losses, max(5, len(losses) // 5))
    fmt = statistics.fmean(t.reward_details.get("format", 0.0) for t in trajs)
    sim = statistics.fmean(pairwise_similarity(ts) for ts in texts)
    return Graduation(
        loss_window_drop=drop, format_rate=fmt,
        tool_call_accuracy=1.0 - sum(t.num_tool_errors for t in trajs) / calls if calls else 0.0,
        accuracy=statistics.fmean(t.reward_details.get("correct", 0.0) for t in trajs),
        pairwise_similarity=sim, distinct_2=statistics.fmean(distinct_n(ts) for ts in texts),
        converged=drop is not None and drop < s.max_loss_drop, formatted=fmt >= s.min_format, diverse=sim <= s.max_similarity)
