"""Held-out evaluation: episodes on each split (one greedy episode a task, or `eval.samples` sampled
ones with pass@k), scored by the env's reward; every accuracy with its bootstrap interval over tasks
(`monitor/intervals.py`)."""

from __future__ import annotations

import json
import statistics
from collections.abc import Sequence
from pathlib import Path

from tqdm import tqdm

from agentic_rl.envs.spec import EnvSpec
from agentic_rl.errors import UserDataError
from agentic_rl.monitor.intervals import bootstrap_ci, mean_of_means_ci, pass_at_k
from agentic_rl.monitor.metrics import capabilities, rollout_metrics
from agentic_rl.trainer.config import Config
from agentic_rl.trainer.distributed import world
from agentic_rl.trainer.episodes import episodes
from agentic_rl.trainer.rollouts import RolloutSetting, make_rollouts
from agentic_rl.types import Task, TrajectoryGroup


def load_task_file(path: str | Path) -> list[Task]:
    """A user's own tasks: one JSON object per line with `prompt` and `answer`."""
    tasks = []
    for n, line in enumerate(Path(path).read_text().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            tasks.append(Task(id=str(row.get("id", f"custom-{n}")), prompt=row["prompt"], answer=row["answer"],
                              meta={"split": "custom"}))
        except (json.JSONDecodeError, KeyError, TypeError) as e:
            raise UserDataError(f"{path}:{n}: expected a JSON object with 'prompt' and 'answer' ({e})") from None
    if not tasks:
        raise UserDataError(f"{path}: no tasks")
    return tasks


def run_episodes(engine, tokenizer, spec: EnvSpec, cfg: Config, tasks: Sequence[Task], fewshot: bool,
                 label: str) -> list:
    """`eval.samples` episodes a task (one: greedy; more: at the rollout's temperature), scored, in
    batches of `eval.batch_size` episodes (the splits of an evaluation share batches: one batch of
    200 ran 1.13x faster than two of 100 here), through the recipe's rollout backend
    (`trainer/rollouts.py`), with a progress bar of episodes. Data-parallel ranks each run their
    share of the tasks; every rank gets all the episodes."""
    k = cfg.eval.samples
    temperature = 0.0 if k == 1 else cfg.rollout.temperature
    ep = episodes(spec, {**cfg.env.options, "fewshot": fewshot}, cfg.rollout, temperature=temperature, concurrent=False)
    w = world()
    tasks = w.share(tasks)
    rollouts = make_rollouts(RolloutSetting(cfg=cfg, engine=engine, tokenizer=tokenizer, episodes=ep, evaluation=True))
    groups, size = [], max(1, cfg.eval.batch_size // k)
    bar = tqdm(total=len(tasks) * k, desc=f"eval {label}", unit="episode", disable=not cfg.log.progress, leave=False)
    try:
        for i in range(0, len(tasks), size):
            groups += rollouts.rollout(tasks[i : i + size], k, seed=cfg.eval.seed + i, progress=bar.update)[0]
    finally:
        bar.close()
        rollouts.close()
    return w.unshare(w.gather(groups))


def split_metrics(groups) -> dict:
    """A split's metrics from its scored groups (each task's episodes). Episodes the machine failed
    (`faults.py`) are not the model's: they are counted (`infra_failures`) and left out of every
    other figure. `accuracy` is the mean over episodes (mean@k), with its interval over tasks."""
    failed = sum(t.infra_failure is not None for g in groups for t in g.trajectories)
    groups = _kept(groups)
    m = rollout_metrics(groups) if groups else dict.fromkeys(
        ("accuracy", "format_rate", "tool_calls_per_episode", "tool_error_rate", "turns_per_episode",
         "truncation_rate", "tokens_generated"), 0.0)
    per_task = [_correct(g) for g in groups]
    return {
        "n": len(groups),
        **({"infra_failures": failed} if failed else {}),
        "accuracy": m["accuracy"],
        "accuracy_ci": list(bootstrap_ci(_task_means(groups))),
        **_pass_at(per_task),
        "format_rate": m["format_rate"],
        "tool_calls_per_episode": m["tool_calls_per_episode"],
        "tool_error_rate": m["tool_error_rate"],
        "turns_per_episode": m["turns_per_episode"],
        "truncation_rate": m["truncation_rate"],
        "tokens_generated": m["tokens_generated"],
        **({"capabilities": {k.removeprefix("cap/"): v for k, v in capabilities(groups).items()}} if groups else {}),
        **_by_kind(groups),
        "samples": [_sample(g) for g in groups[:3]],
        "failures": _failures(groups),
    }


def _kept(groups) -> list[TrajectoryGroup]:
    """The groups without the episodes the machine failed; a task left with none is dropped."""
    return [TrajectoryGroup(g.task, kept) for g in groups
            if (kept := tuple(t for t in g.trajectories if t.infra_failure is None))]


def _correct(group) -> list[float]:
    """Each episode's `correct` (0 where the reward has none): what accuracy counts."""
    return [t.reward_details.get("correct", 0.0) for t in group.trajectories]


def _task_means(groups) -> list[float]:
    """Each task's mean `correct` over its episodes: the unit the intervals resample."""
    return [statistics.fmean(_correct(g)) for g in groups]


def _pass_at(per_task: list[list[float]]) -> dict:
    """pass@j for j = 1, 2, 4, ... and k (the samples a task), each the mean over tasks of the
    unbiased estimate, with its interval; nothing for one episode a task."""
    k = min((len(c) for c in per_task), default=1)
    if k < 2:
        return {}
    js = sorted({*(2**i for i in range(k.bit_length()) if 2**i <= k), k})
    out: dict = {"samples_per_task": k, "pass_at": {}, "pass_at_ci": {}}
    for j in js:
        values = [pass_at_k(len(c), int(sum(x >= 1.0 for x in c)), j) for c in per_task]
        out["pass_at"][str(j)] = statistics.fmean(values)
        out["pass_at_ci"][str(j)] = list(bootstrap_ci(values))
    return out


def _sample(group) -> dict:
    t = group.trajectories[0]  # the first episode of the task
    return {"prompt": group.task.prompt, "answer": group.task.answer,
            "output": " | ".join(turn.action_text for turn in t.turns), "reward": t.reward}


def _failures(groups, key: str = "template") -> list[dict]:
    """The first wrong episode of each task kind (of each task, without kinds): what a split's errors
    look like, one of a kind, without re-running the model. "Wrong" is judged as `accuracy` judges it
    (the reward's `correct` part, 0 where it has none), so a right answer that lost only its format
    bonus is not listed, and the kinds listed are the kinds below 1 in `accuracy_by_<key>`."""
    seen, out = set(), []
    for g in groups:
        kind = str(g.task.meta.get(key, g.task.id))
        wrong = next((t for t in g.trajectories if t.reward_details.get("correct", 0.0) < 1.0), None)
        if kind in seen or wrong is None:
            continue
        seen.add(kind)
        out.append({key: kind, **_sample(TrajectoryGroup(g.task, (wrong,)))})
    return out


def _by_kind(groups, key: str = "template") -> dict:
    """Accuracy per task kind (the meta field the pass-rate curriculum also groups by), when the
    tasks have one: where a split's errors sit."""
    tasks: dict[str, list[float]] = {}
    for g in groups:
        if key in g.task.meta:
            tasks.setdefault(str(g.task.meta[key]), []).append(statistics.fmean(_correct(g)))
    if not tasks:
        return {}
    return {f"accuracy_by_{key}": {k: {"n": len(v), "accuracy": statistics.fmean(v), "ci": list(bootstrap_ci(v))}
                                   for k, v in sorted(tasks.items())}}


def evaluate(engine, tokenizer, spec: EnvSpec, cfg: Config, fewshot: bool = False, label: str = "",
             tasks: Sequence[Task] | None = None, episodes: dict | None = None) -> dict:
    """{split: metrics, ..., "overall": accuracy over all evaluated tasks}; `episodes`, when given,
    receives {split: scored groups}."""
    if tasks is not None:
        splits = {"custom": list(tasks)}
    else:
        splits = {s: spec.tasks(s, cfg.eval.tasks_per_split, cfg.eval.seed) for s in cfg.eval.splits}
    groups = run_episodes(engine, tokenizer, spec, cfg, [t for ts in splits.values() for t in ts], fewshot, label)
    result, at, per_split = {}, 0, []
    for s, ts in splits.items():
        part, at = groups[at : at + len(ts)], at + len(ts)
        result[s] = split_metrics(part)
        per_split.append(_task_means(_kept(part)))
        if episodes is not None:
            episodes.setdefault(s, []).extend(part)
    result["overall"] = statistics.fmean(r["accuracy"] for r in result.values()) if result else 0.0
    result["overall_ci"] = list(mean_of_means_ci(per_split))
    return result


def accuracies(result: dict) -> dict:
    """An `evaluate` result as one metrics row: accuracy_<split> and accuracy_overall."""
    return {f"accuracy_{k}": (v["accuracy"] if isinstance(v, dict) else v) for k, v in result.items()
            if isinstance(v, dict) or k == "overall"}
