"""An engine that replays fixed action texts: the real rollout loop, env and tokenizer, no model.

`agentic-rl check-env` drives envs with it (demonstrations, hostile actions, budget exhaustion), and
tests use it where a model would never write the action under test. It stops where a real engine
stops: after the first stop string, at the end-of-turn token, or at the token limit.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from agentic_rl.engines.base import Sample, SamplingParams

Script = Callable[[int, int], str]  # (row, turn) -> the action text the "model" writes


class ScriptedEngine:
    version = 0

    def __init__(self, tokenizer, script: Script, logprob: float = -1.0):
        self.tokenizer = tokenizer
        self.script = script
        self.logprob = logprob  # what the engine reports for each scripted token
        self.eos_ids = frozenset({tokenizer.eos_token_id} - {None})
        self.dtype = "scripted"

    def session(self, seed: int = 0, row_seeds: Mapping[int, int] | None = None) -> _ScriptedSession:
        """`row_seeds` (the server's per-request streams) change nothing: a script draws nothing."""
        return _ScriptedSession(self)

    def sync_weights(self) -> int:
        return self.version

    def sample(self, row: int, turn: int, params: SamplingParams, limit: int) -> Sample:
        text = self.script(row, turn)
        cuts = [text.index(s) + len(s) for s in params.stop_strings if s in text]
        reason = "stop" if cuts else "length"
        if cuts:
            text = text[: min(cuts)]
        eos = self.tokenizer.eos_token
        if not cuts and eos and eos in text:
            text, reason = text[: text.index(eos) + len(eos)], "eos"
        ids = self.tokenizer.encode(text, add_special_tokens=False)
        if len(ids) > limit:
            ids, reason = ids[:limit], "length"
            text = self.tokenizer.decode(ids)
        return Sample(tuple(ids), (self.logprob,) * len(ids), text, reason)


class _ScriptedSession:
    def __init__(self, engine: ScriptedEngine):
        self.engine = engine

    def run(
        self,
        prompts: Mapping[int, Sequence[int]],
        params: SamplingParams,
        on_stop: Callable[[int, Sample], Sequence[int] | None],
        max_new: Callable[[int], int] | None = None,
        on_error: Callable[[int, str], None] | None = None,  # a script never fails
        on_token: Callable[[int, int], None] | None = None,
    ) -> None:
        for row in prompts:
            turn = 0
            while True:
                limit = min(params.max_new_tokens, max_new(row) if max_new else params.max_new_tokens)
                sample = self.engine.sample(row, turn, params, max(limit, 1))
                for tok in sample.ids if on_token is not None else ():
                    on_token(row, tok)
                if on_stop(row, sample) is None:
                    break
                turn += 1
