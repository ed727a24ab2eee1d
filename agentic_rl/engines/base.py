"""The sampling protocol every engine implements, in the rollout's terms."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
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


class Restart(tuple):
    """What `on_stop` returns when a row's context starts over: these ids are a whole new prompt, fed
    in place of everything the row held (a format whose template rewrites the history, `history:
    template`); the row's next action is sampled from them alone."""


class Session(Protocol):
    """The episodes of one rollout batch. `run` decodes every row to the end of its episode: when a
    row's action stops, `on_stop(row, sample)` returns the ids to feed before its next action (a
    `Restart`: a whole new prompt instead), or None when the episode is over. `max_new(row)` bounds the row's next action. An engine whose
    requests can fail one by one (a served one) ends a failed row with `on_error(row, why)`.
    `on_token(row, id)`, when given, hears each token as it is sampled, before the `on_stop` of its
    action (an engine that gets replies whole, a served one, reports none: `on_stop` has them all)."""

    def run(
        self,
        prompts: Mapping[int, Sequence[int]],
        params: SamplingParams,
        on_stop: Callable[[int, Sample], Sequence[int] | None],
        max_new: Callable[[int], int] | None = None,
        on_error: Callable[[int, str], None] | None = None,
        on_token: Callable[[int, int], None] | None = None,
    ) -> None: ...


class Engine(Protocol):
    version: int
    tokenizer: object  # the tokenizer whose ids it samples: the rollout renders and reads with it

    def session(self, seed: int) -> Session: ...

    def sync_weights(self) -> int: ...
