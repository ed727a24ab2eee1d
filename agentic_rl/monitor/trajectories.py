"""Trajectory files: one JSON line per episode with the exact tokens, mask, logprobs and text."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from agentic_rl.errors import UserFileError
from agentic_rl.types import Trajectory


def trajectory_record(t: Trajectory, tokenizer, advantages: Sequence[float] | None = None,
                      step: int | None = None) -> dict:
    """`advantages`: per token, aligned with `token_ids()` (0 off sampled tokens)."""
    mask = t.loss_mask()
    sampled = [a for a, m in zip(advantages, mask) if m] if advantages is not None else []
    return {
        "step": step,
        "task_id": t.task.id,
        "prompt": t.task.prompt,
        "answer": t.task.answer,
        "meta": dict(t.task.meta),
        "reward": t.reward,
        "reward_details": dict(t.reward_details),
        "advantage": sum(sampled) / len(sampled) if sampled else None,  # mean over sampled tokens
        "terminated": t.terminated,
        "truncated": t.truncated,
        "error": t.error,
        **({"infra_failure": t.infra_failure} if t.infra_failure is not None else {}),
        "turns": [
            {
                "obs_text": tokenizer.decode(turn.obs_ids, skip_special_tokens=False),
                "obs_ids": list(turn.obs_ids),
                "action_text": turn.action_text,
                "action_ids": list(turn.action_ids),
                "logprobs": [round(x, 5) for x in turn.logprobs],
                "stop_reason": turn.stop_reason,
                "observation": turn.observation,
                "tool_calls": [{"name": c.name, "arguments": dict(c.arguments)} for c in turn.tool_calls],
                "tool_errors": turn.tool_errors,
                **({"malformed_calls": turn.malformed_calls} if turn.malformed_calls else {}),
                "reward": turn.reward,
                "trained": turn.trained,
                # the context started over here: obs_ids are the whole new prompt (`Turn.restart`)
                **({"restart": True} if turn.restart else {}),
                # the weight version that sampled it, where the rollout records one (partial rollouts)
                **({"version": turn.version} if turn.version is not None else {}),
            }
            for turn in t.turns
        ],
        "token_ids": t.token_ids(),
        "loss_mask": mask,
        "advantages": [round(float(a), 5) for a in advantages] if advantages is not None else None,
    }


def write_trajectories(
    path: Path, trajectories: Sequence[Trajectory], tokenizer, advantages: Sequence | None = None,
    step: int | None = None,
) -> None:
    """Append one line per trajectory; `advantages[i]` is trajectory i's per-token advantage."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as f:
        for i, t in enumerate(trajectories):
            adv = None if advantages is None else [float(a) for a in advantages[i]]
            f.write(json.dumps(trajectory_record(t, tokenizer, adv, step)) + "\n")


def read_episodes(where: Path, limit: int = 0, with_errors: bool = False) -> list[Trajectory]:
    """The episodes of a run folder's `trajectories/*.jsonl` (or of one such file), in file order;
    those that ended in an error only `with_errors`; the first `limit` (0 = all)."""
    from agentic_rl.rollout.sft_data import trajectory_from_record

    files = sorted((where / "trajectories").glob("*.jsonl")) if where.is_dir() else [where]
    if not files or not all(f.is_file() for f in files):
        raise UserFileError(f"{where}: no trajectory files (a run folder's trajectories/*.jsonl, or one such file)")
    out = []
    for f in files:
        for k, line in enumerate(f.read_text().splitlines(), 1):
            try:
                t = trajectory_from_record(json.loads(line))
            except (ValueError, KeyError) as e:
                raise UserFileError(f"{f}:{k}: not a trajectory record ({e})") from None
            if with_errors or t.error is None:
                out.append(t)
            if limit and len(out) >= limit:
                return out
    return out
