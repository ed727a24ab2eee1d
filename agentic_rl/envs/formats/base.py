"""What every tool-call protocol provides, and the parse result they share.

A format turns messages into the exact text the model reads and writes, says where generation stops,
and parses an action into tool calls. The rollout relies on one property of every format: the prompt,
then each action as sampled, then `render_observation(...)` glue, concatenate to what
`render_prompt` shows for the whole conversation (prefix preservation), so observation tokens can be
appended without re-tokenizing what was sampled.

Pure strings, no torch: envs and tools must import in a sandbox worker without a model.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from agentic_rl.types import ToolCall

IM_START, IM_END = "<|im_start|>", "<|im_end|>"


@dataclass(frozen=True)
class ParsedAction:
    """What an assistant action asked for. `errors` are messages the model will read as observations."""

    tool_calls: tuple[ToolCall, ...] = ()
    errors: tuple[str, ...] = ()
    attempted: bool = False  # the text tried to call a tool (well-formed or not)

    @property
    def is_final(self) -> bool:
        return not self.attempted


class ToolFormat(Protocol):
    name: str
    stop_strings: tuple[str, ...]  # generation stops after any of these (a closing call tag)
    end_of_turn: str  # the text of the token that ends an assistant turn (the policy learns to emit it)
    # optional `call_end: str`: what the policy writes after a call that has no closing tag of its
    # own (the end-of-turn marker: Llama, Mistral, Gemma); "" when absent (`rollout/demos.py`)
    # optional `opens_with_bos: bool`: the rendering is read after the tokenizer's BOS (`formats.bos_text`)
    # optional `call_openers: tuple[str, ...]`: where a call may start; the text before the first is
    # prose whatever follows (a streamed reply sends it as it comes, `engines/sse.py`)

    def render_prompt(self, messages: Sequence[Mapping], tools: Sequence[Mapping] = ()) -> str:
        """The whole conversation so far, ending where the next action starts."""
        ...

    def render_assistant_body(self, message: Mapping) -> str:
        """The text the policy itself writes for an assistant message (OpenAI-style `tool_calls`
        rendered in this protocol), without the turn markers."""
        ...

    def render_observation(self, messages: Sequence[Mapping], action_closed: bool) -> str:
        """Glue between two actions: the tool results and whatever markup surrounds them.
        `action_closed`: the action ended with the end-of-turn token."""
        ...

    def parse(self, text: str) -> ParsedAction:
        """Tool calls in an action. Never raises: malformed calls become error strings."""
        ...
