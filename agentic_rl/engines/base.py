"""The sampling protocol every engine implements, in the rollout's terms."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class SamplingParams:
    """temperature 0 means greedy. Logprobs are of the tempered distribution, before top-p."""

    temperature: float = 1.0
    top_p: float = 1.0
    max_new_tokens: int = 128
    stop_strings: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.temperature < 0 or not 0 < self.top_p <= 1 or self.max_new_tokens < 1:
            raise ValueError(f"invalid sampling params: {self}")


@dataclass(frozen=True)
class Sample:
    ids: tuple[int, ...]
    logprobs: tuple[float, ...]
    text: str
    stop_reason: str  # "eos" | "stop" | "length"


class Session(Protocol):
    """Episodes decoded together. Each `generate` appends `new_ids[row]` to that row's context and
    samples its next action; rows left out of `new_ids` are finished and dropped for good."""

    def generate(
        self, new_ids: Mapping[int, Sequence[int]], params: SamplingParams, max_new: Mapping[int, int] | None = None
    ) -> dict[int, Sample]: ...


class Engine(Protocol):
    version: int

    def session(self, seed: int) -> Session: ...

    def sync_weights(self) -> int: ...
