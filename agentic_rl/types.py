"""The data contract between stages. Depends on nothing else in the package.

Tokens are the truth: a `Trajectory` keeps the exact ids the engine sampled (`Turn.action_ids`), the
engine's logprobs of them, and the exact ids of everything inserted between actions (`Turn.obs_ids`:
the prompt before the first action, tool observations and template glue before later ones). The
training sequence is their concatenation; nothing downstream re-tokenizes text.

An episode whose context was started over (`Turn.restart`: a chat template that rewrites history, an
agent that edited its own) is still one trajectory, one sample of its group: its training row holds
one segment per context, and attention never crosses a segment (`Trajectory.segment_ids`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any


@dataclass(frozen=True)
class Task:
    """One problem with a checkable answer. `meta` carries generator facts (template, split, difficulty)."""

    id: str
    prompt: str
    answer: Any = None
    meta: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: Mapping[str, Any]


@dataclass(frozen=True)
class Turn:
    """One action of the policy and the tokens that preceded it.

    obs_ids: tokens fed to the model before this action (never trained: loss mask 0).
    action_ids / logprobs: what the engine sampled and its logprobs (loss mask 1).
    observation: the env's text reply to this action ("" for the final action).
    """

    obs_ids: tuple[int, ...]
    action_ids: tuple[int, ...]
    logprobs: tuple[float, ...]
    action_text: str
    stop_reason: str  # "eos" | "stop" (a stop string such as </tool_call>) | "length"
    observation: str = ""
    tool_calls: tuple[ToolCall, ...] = ()  # calls that parsed (they may still have failed)
    malformed_calls: int = 0  # call attempts that did not parse
    tool_errors: int = 0  # every failed attempt: malformed, unknown tool, bad arguments, raised, timed out
    reward: float | None = None  # per-turn (process) reward, if any
    # False: an action shown but not learned (loss mask 0), e.g. the deliberate mistake of a recovery
    # demonstration, or an assistant message with "weight": 0 in an OpenAI-style SFT file
    trained: bool = True
    # True: `obs_ids` are a whole new prompt, the policy's context started over here (a template that
    # rewrites history, `history: template`; a recorded agent that edited its own): this turn and the
    # ones after it attend only from here (`Trajectory.contexts`)
    restart: bool = False
    # the weight version of the sampler that sampled this action, when the rollout records it (partial
    # rollouts, `rollout/partial.py`: one episode's turns may be sampled by several versions)
    version: int | None = None

    def __post_init__(self) -> None:
        if len(self.action_ids) != len(self.logprobs):
            raise ValueError(f"{len(self.action_ids)} action ids but {len(self.logprobs)} logprobs")


@dataclass(frozen=True)
class Trajectory:
    """A whole episode: the turns in order, the outcome reward and how the episode ended."""

    task: Task
    turns: tuple[Turn, ...]
    reward: float = 0.0
    reward_details: Mapping[str, float] = field(default_factory=dict)
    terminated: bool = False  # the env ended the episode (final answer given)
    truncated: bool = False  # a budget ended it (max turns, tokens)
    error: str | None = None
    # the machine failed, not the policy (`faults.py`: reset, env_step, reward, sandbox_start,
    # tool_backend): the episode trains nothing and leaves its group's statistics
    infra_failure: str | None = None

    def token_ids(self) -> list[int]:
        return [t for turn in self.turns for t in (*turn.obs_ids, *turn.action_ids)]

    def loss_mask(self) -> list[int]:
        trained = self.infra_failure is None
        return [m for turn in self.turns
                for m in (*[0] * len(turn.obs_ids), *[int(turn.trained and trained)] * len(turn.action_ids))]

    def sampled_logprobs(self) -> list[float]:
        """Engine logprobs aligned with `token_ids()`; 0.0 where nothing was sampled."""
        return [lp for turn in self.turns for lp in (*[0.0] * len(turn.obs_ids), *turn.logprobs)]

    def segment_ids(self) -> list[int]:
        """Per token, the context it belongs to: 0 until the first `Turn.restart`, then 1, ..."""
        out, k = [], 0
        for i, turn in enumerate(self.turns):
            k += bool(turn.restart and i)
            out += [k] * (len(turn.obs_ids) + len(turn.action_ids))
        return out

    def contexts(self) -> list[Trajectory]:
        """The episode cut at its restarts: one trajectory per context, each an exact row of its own
        (the whole episode when it never started over)."""
        cuts = [i for i, turn in enumerate(self.turns) if turn.restart and i] + [len(self.turns)]
        if len(cuts) == 1:
            return [self]
        return [replace(self, turns=tuple(replace(t, restart=False) for t in self.turns[a:b]))
                for a, b in zip([0, *cuts[:-1]], cuts)]

    @property
    def restarts(self) -> int:
        return sum(1 for i, turn in enumerate(self.turns) if turn.restart and i)

    @property
    def num_generated(self) -> int:
        return sum(len(t.action_ids) for t in self.turns)

    @property
    def num_tool_calls(self) -> int:
        return sum(len(t.tool_calls) + t.malformed_calls for t in self.turns)

    @property
    def num_tool_errors(self) -> int:
        return sum(t.tool_errors for t in self.turns)

    @property
    def final_text(self) -> str:
        return self.turns[-1].action_text if self.turns else ""


@dataclass(frozen=True)
class TrajectoryGroup:
    """G samples of one task: the unit group-relative advantages are computed over."""

    task: Task
    trajectories: tuple[Trajectory, ...]

    @property
    def rewards(self) -> list[float]:
        return [t.reward for t in self.trajectories]


@dataclass(frozen=True)
class RolloutBatch:
    """What crosses from sampling to training: the scored groups of a step (each trajectory holds its
    exact token ids, its loss mask and the sampler's logprobs) and the policy version that sampled
    them. Whatever samples — the embedded engine, a served one, a stale worker — meets the trainer here."""

    groups: tuple[TrajectoryGroup, ...]
    policy_version: int = 0


@dataclass(frozen=True)
class Batch:
    """One micro-batch of training rows. Tensors are typed Any so this module needs no torch.

    Every row starts with the same `prefix_ids` (the longest common prefix of the rows: a group's
    prompt), which the trainer forwards once and shares; `input_ids` (B, T) are the rest of each row,
    right-padded. loss_mask is 1 exactly on sampled tokens; advantages and the sampler's logprobs are 0
    elsewhere. Position t of every (B, T) tensor is about token input_ids[:, t]. With `packed`, the
    model forwards the rows back to back in one padding-free row instead; its outputs come back in
    this (B, T) layout.
    """

    prefix_ids: tuple[int, ...]
    input_ids: Any
    attention_mask: Any
    loss_mask: Any
    advantages: Any
    sampler_logprobs: Any  # the engine's logprobs of the sampled tokens (the behaviour policy)
    segment_ids: Any | None = None  # packed rows: (B, T) conversation index per token (-1 on padding)
    packed: Any | None = None  # the forward's padding-free layout of these rows (`trainer/batching.py`'s `PackedRows`)

    def __len__(self) -> int:
        return int(self.input_ids.shape[0])

    def to(self, device) -> Batch:
        """The batch on `device` (the model's): built on the host, moved once before a forward."""
        move = lambda x: None if x is None else x.to(device)  # noqa: E731
        return Batch(self.prefix_ids, move(self.input_ids), move(self.attention_mask), move(self.loss_mask),
                     move(self.advantages), move(self.sampler_logprobs), move(self.segment_ids),
                     None if self.packed is None else self.packed.to(device))
