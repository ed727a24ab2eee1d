"""SFT data from files: OpenAI-style conversations, or our own trajectory files (rejection sampling).

Both become `Trajectory` objects in the rollout's token layout, so SFT trains with the same masks
and token-exactness guarantees as RL: loss on assistant actions only.

- A conversations file has one JSON object per line: `{"messages": [...], "tools": [...]}` with
  OpenAI chat messages (`assistant` messages may carry `tool_calls`; results are `tool` messages).
  `tools` (JSON schemas) is optional; the env's own tools are the default.
- A trajectory file is what a run writes to `trajectories/*.jsonl`: the exact token ids of every
  turn are reused as they were sampled (no re-tokenization), keeping episodes whose reward reaches
  `min_reward`.

Errors name the file and line.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

from agentic_rl.errors import UserDataError, UserFileError
from agentic_rl.rollout.demos import conversation_trajectory
from agentic_rl.types import Task, ToolCall, Trajectory, Turn


def load_sft_file(path: str | Path, fmt, tokenizer, tools: Sequence[Mapping] = (), min_reward: float = 1.0
                  ) -> list[Trajectory]:
    """Conversations or trajectory records, told apart line by line by their keys."""
    path = Path(path)
    if not path.exists():
        raise UserFileError(f"SFT data file not found: {path}")
    out = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            if not isinstance(record, dict):
                raise ValueError("expected a JSON object")
            if "messages" in record:
                out.append(_conversation(record, f"{path.name}:{n}", fmt, tokenizer, tools))
            elif "turns" in record:
                t = trajectory_from_record(record)
                if t.reward >= min_reward:
                    out.append(t)
            else:
                raise ValueError("expected 'messages' (a conversation) or 'turns' (a trajectory record)")
        except (ValueError, KeyError, TypeError) as e:
            raise UserDataError(f"{path}:{n}: {e}") from None
    return out


def _conversation(record: Mapping, where: str, fmt, tokenizer, tools: Sequence[Mapping]) -> Trajectory:
    messages = record["messages"]
    for i, m in enumerate(messages):
        if m.get("role") not in ("system", "user", "assistant", "tool"):
            raise ValueError(f"message {i}: unknown role {m.get('role')!r}")
        if m["role"] != "assistant" and not isinstance(m.get("content"), str):
            raise ValueError(f"message {i}: a {m['role']} message needs text content")
    user = next((m["content"] for m in messages if m["role"] == "user"), "")
    return conversation_trajectory(Task(where, user), messages, record.get("tools", tools), fmt, tokenizer)


def trajectory_from_record(record: Mapping) -> Trajectory:
    """A trajectory file line back into the exact `Trajectory` that was written."""
    task = Task(record["task_id"], record["prompt"], record.get("answer"), record.get("meta", {}))
    turns = tuple(
        Turn(tuple(t["obs_ids"]), tuple(t["action_ids"]), tuple(t["logprobs"]), t["action_text"], t["stop_reason"],
             observation=t.get("observation", ""),
             tool_calls=tuple(ToolCall(c["name"], c["arguments"]) for c in t.get("tool_calls", ())),
             malformed_calls=t.get("malformed_calls", 0), tool_errors=t.get("tool_errors", 0),
             reward=t.get("reward"), trained=t.get("trained", True), restart=t.get("restart", False),
             version=t.get("version"))
        for t in record["turns"]
    )
    return Trajectory(task, turns, reward=record.get("reward", 0.0), reward_details=record.get("reward_details", {}),
                      terminated=record.get("terminated", False), truncated=record.get("truncated", False),
                      error=record.get("error"), infra_failure=record.get("infra_failure"))


def teacher_demonstrations(engine, tokenizer, episodes, tasks: Sequence[Task], samples: int,
                           min_reward: float = 1.0) -> list[Trajectory]:
    """Cold-start data from a teacher: `samples` episodes per task by any engine sharing the policy's
    tokenizer (a larger local model, a scripted expert), made and scored as `episodes`
    (`rollout/backends.Episodes`: the env, its verifier, the sampling and the budget) says, kept only
    where the verifier gives at least `min_reward`. The exact tokens the teacher produced are what SFT
    trains on."""
    from agentic_rl.rewards.scoring import score_groups
    from agentic_rl.rollout.loop import rollout

    groups, _ = rollout(engine, episodes.make_env, tasks, samples, episodes.params, episodes.budget)
    scored = score_groups(episodes.reward, groups)
    return [t for g in scored for t in g.trajectories if t.reward >= min_reward and not t.error]
