"""SkyRL-Gym's text envs (`skyrl_gym.envs.BaseTextEnv`) as agent envs: `env: {name: "skyrl:ID"}`
(docs/envs/skyrl_gym.md).

A SkyRL text env is made per episode with `skyrl_gym.make(ID, env_config=..., extras=ROW)` — ROW is
a dataset row without its `prompt` and `env_class`, as SkyRL's own generator passes it — and reads
the policy's whole reply: `init(prompt)` gives the first messages, `step(reply)` returns the next
messages (user turns), a reward and `done`. The env parses the reply itself (its `<sql>`, `<search>`
or `####`), so the format only renders the conversation and says where a reply stops: the env's
closing action tag (`</sql>` for text2sql, `</search>`), or nowhere but the end of turn (a final
answer ends there too: the policy learns to close its turn). The
reply reaches `step` as SkyRL's generator decodes it, without the end-of-turn marker.

Each step's reward is that turn's reward (`Turn.reward`, the per-turn reward of `types.py`), and the
episode's outcome is their sum, the return (`correct`: a turn reached `success`, 1.0). `done` ends
the episode as terminated; SkyRL does not say whether it was an answer or its own turn limit.

Tasks: a SkyRL dataset file (`train`, `heldout`: Parquet or JSONL rows in SkyRL's layout) or, for the
envs SkyRL ships, local rows (`skyrl_data.py`: gsm8k, gsm8k_multi_turn, text2sql, search).

Options: `train`, `heldout` (else `heldout_frac` 0.1 of train, `split_seed` 0), `env_config` (SkyRL's
per-env config, over the local data's), `max_turns` (into the row, as SkyRL's `generator.max_turns`),
`stop` (the env's own by default), `success` (1.0), `format` (a chat-template format, `openai`).
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import json
from collections.abc import Mapping, Sequence
from typing import Any

from agentic_rl.data import task_files
from agentic_rl.envs.adapters.skyrl_data import LOCAL, SPLITS, LocalData
from agentic_rl.envs.base import StepResult
from agentic_rl.envs.formats import get_format
from agentic_rl.envs.spec import EnvSpec
from agentic_rl.errors import UserDataError, UserError
from agentic_rl.rewards.base import Score
from agentic_rl.types import Task, Trajectory

OPTIONS = ("train", "heldout", "heldout_frac", "split_seed", "env_config", "max_turns", "stop", "success", "format")
NOT_EXTRAS = ("prompt", "env_class")  # a row's other fields are the env's extras (SkyRL's generator)


class SkyRLEnv:
    """One episode of SkyRL-Gym env `env_id`, made at reset from the task's row."""

    def __init__(self, env_id: str, options: Mapping[str, Any], local: LocalData | None):
        self.env_id = env_id
        self.config = {**(local.env_config() if local else {}), **dict(options.get("env_config", {}))}
        self.max_turns = options.get("max_turns")
        stop = tuple(options.get("stop", local.stop if local else ()))
        self.format = dataclasses.replace(get_format(str(options.get("format", "openai"))), stop_strings=stop)
        self.tool_schemas: Sequence[Mapping[str, Any]] = ()
        self.env = None

    def reset(self, task: Task) -> list[dict]:
        import skyrl_gym
        from omegaconf import OmegaConf

        self.close()
        extras = copy.deepcopy(dict(task.meta["extras"]))
        if self.max_turns is not None:
            extras["max_turns"] = int(self.max_turns)
        self.env = skyrl_gym.make(self.env_id, env_config=OmegaConf.create(self.config), extras=extras)
        messages, _ = self.env.init(copy.deepcopy(list(task.meta["prompt"])))
        return [dict(m) for m in messages]

    def step(self, action: str) -> StepResult:
        out = self.env.step(action.removesuffix(self.format.end_of_turn))
        done = bool(out["done"])
        observation = () if done else tuple({"role": m["role"], "content": str(m["content"])} for m in out["observations"])
        return StepResult(observation=observation, reward=float(out["reward"]), terminated=done)

    def close(self) -> None:
        if self.env is not None:
            self.env.close()
            self.env = None


def episode_return(trajectory: Trajectory) -> float:
    """The sum of the env's per-step rewards."""
    return sum(t.reward or 0.0 for t in trajectory.turns)


@dataclasses.dataclass(frozen=True)
class SkyRLReturn:
    """The outcome is the return; `correct`: some step's reward reached `success`."""

    success: float = 1.0

    def __call__(self, task: Task, trajectory: Trajectory) -> Score:
        ret = episode_return(trajectory)
        best = max((t.reward or 0.0 for t in trajectory.turns), default=0.0)
        return Score(ret, {"return": ret, "correct": float(best >= self.success)})


def row_task(row: Mapping[str, Any], where: str, split: str, task_id: str) -> Task:
    """A SkyRL dataset row as a task: its `prompt` messages (the last user turn is the task's prompt),
    its extras (every other field but `env_class`) for the env, the ground truth as the answer."""
    prompt = row.get("prompt")
    if not (isinstance(prompt, (list, tuple)) and prompt and all(isinstance(m, Mapping) and "role" in m for m in prompt)):
        raise UserDataError(f"{where}: 'prompt' must be a list of chat messages, as SkyRL's datasets hold it")
    if prompt[-1]["role"] != "user":
        raise UserDataError(f"{where}: the prompt must end with a user message")
    messages = [{"role": str(m["role"]), "content": str(m["content"])} for m in prompt]
    extras = {k: v for k, v in row.items() if k not in NOT_EXTRAS}
    answer = (extras.get("reward_spec") or {}).get("ground_truth")
    return Task(id=task_id, prompt=messages[-1]["content"], answer=answer,
                meta={"prompt": messages, "extras": extras, "split": split})


def _file_tasks(path: str, split: str) -> list[Task]:
    tasks = [row_task(row, where, split, str(row.get("id", f"{split}-{i}")))
             for i, (where, row) in enumerate(task_files.read_rows(path))]
    if not tasks:
        raise UserDataError(f"{path}: no tasks (the file is empty)")
    return tasks


@functools.lru_cache(maxsize=8)
def _bound(env_id: str, key: str) -> EnvSpec:
    """The spec of a SkyRL dataset file (read once per distinct options)."""
    options = json.loads(key)
    train = _file_tasks(options["train"], "train")
    if options.get("heldout"):
        heldout = _file_tasks(options["heldout"], "heldout")
    else:
        train, heldout = task_files.split_tasks(train, float(options.get("heldout_frac", 0.1)),
                                                int(options.get("split_seed", 0)))
        heldout = [dataclasses.replace(t, meta={**t.meta, "split": "heldout"}) for t in heldout]
    task_files.check_disjoint(train, heldout, str(options.get("heldout") or options["train"]))
    by_split = {"train": train, "heldout": heldout}
    return dataclasses.replace(skyrl_spec(env_id), bind=None, tasks=lambda split, n, seed: task_files.draw(
        by_split[split], n, seed, repeat=split == "train"))


def skyrl_spec(env_id: str) -> EnvSpec:
    """The EnvSpec of SkyRL-Gym env `env_id` (any id `skyrl_gym.make` knows, `module:Class` too);
    its tasks are local rows where SkyRL ships the env, else the file `env.options.train` names."""
    local = LOCAL.get(env_id)

    def tasks(split: str, n: int, seed: int) -> list[Task]:
        if local is None:
            raise UserError(f"env skyrl:{env_id}: no local data; name a SkyRL dataset file (env.options.train)")
        return [row_task(row, f"skyrl:{env_id} {split}[{i}]", split, f"skyrl-{env_id}-{split}-{seed}-{i}")
                for i, row in enumerate(local.rows(split, n, seed))]

    def bind(options: Mapping[str, Any]) -> EnvSpec:
        if "train" not in options:
            return dataclasses.replace(spec, bind=None)
        return _bound(env_id, json.dumps({k: options[k] for k in ("train", "heldout", "heldout_frac", "split_seed")
                                          if k in options}, sort_keys=True, default=str))

    solves = local is not None and local.solve is not None
    spec = EnvSpec(name=f"skyrl:{env_id}", make_env=lambda options: SkyRLEnv(env_id, options, local),
                   make_reward=lambda options: SkyRLReturn(float(options.get("success", 1.0))), tasks=tasks,
                   splits=SPLITS, demonstration=functools.partial(_demonstration, local.solve) if solves else None,
                   options=OPTIONS, bind=bind, single_turn=local is not None and local.single_turn)
    return spec


def _demonstration(solve, task: Task, env: SkyRLEnv) -> list[dict]:
    """A reply that solves the local task in the env's own protocol (the gold arithmetic, the gold
    query); tool use is left to RL."""
    return [{"role": "assistant", "content": solve(task.meta["extras"])}]
