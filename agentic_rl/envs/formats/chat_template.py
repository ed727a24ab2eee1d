"""OpenAI function-calling messages through a model's own Jinja chat template.

The conversation is kept as OpenAI-style messages (assistant `tool_calls` with JSON-string
arguments, `tool` results with `tool_call_id`), and the text is whatever the chat template renders:
the format for models whose template already knows tools (Qwen, Hermes, Llama 3.1 ...), and for
exchanging trajectories with OpenAI-compatible tooling. Actions and glue are cut out of full renders,
so the template must be prefix-preserving; that is checked, never assumed.

Calls inside the text use the hermes `<tool_call>` syntax by default, the convention of the
templates above; a family's own syntax is its `calls` parser (`formats/families.py`).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from agentic_rl.envs.formats.base import IM_END, ParsedAction
from agentic_rl.envs.formats.hermes import HERMES, TOOL_CALL_CLOSE
from agentic_rl.models.chat_template import TOOL_CHATML_TEMPLATE

_USER, _ACTION = "\x00user-probe\x00", "\x00action-probe\x00"


@dataclass(frozen=True)
class ChatTemplateFormat:
    template: str = TOOL_CHATML_TEMPLATE
    name: str = "openai"
    stop_strings: tuple[str, ...] = (TOOL_CALL_CLOSE,)
    end_of_turn: str = IM_END
    calls: CallParser = HERMES
    # what the policy writes after a call: "" where the call ends with a closing tag that is a stop
    # string (</tool_call>), the end-of-turn marker where the call has no closing tag of its own
    call_end: str = ""
    # tool-call arguments as the template receives them: JSON strings (the OpenAI API's convention)
    # or mappings (what Hugging Face templates of Llama, Mistral, Gemma index into)
    json_arguments: bool = True
    # where the template's rendering of the next turn does not extend what was sampled (it rewrites
    # the policy's history): "keep" feeds the glue after the sample as sampled (one context; the
    # rendering is not consulted), "template" starts a new context from the template's rendering of
    # the whole conversation, as the model is prompted deployed (`rollout/loop.py`, `Turn.restart`)
    history: str = "keep"

    def render_prompt(self, messages: Sequence[Mapping], tools: Sequence[Mapping] = ()) -> str:
        return self._render(messages, tools, add_generation_prompt=True)

    def render_assistant_body(self, message: Mapping) -> str:
        """The template's text for this action between its turn header and its end of turn."""
        probe = [{"role": "user", "content": _USER}]
        head = self._render(probe, (), add_generation_prompt=True)
        full = self._render([*probe, message], (), add_generation_prompt=False)
        if not full.startswith(head) or self.end_of_turn not in full[len(head):]:
            raise ValueError(f"chat template is not prefix-preserving around an assistant message: {full!r}")
        body = full[len(head):]
        return body[: body.rindex(self.end_of_turn)]

    def render_observation(self, messages: Sequence[Mapping], action_closed: bool) -> str:
        """What the template writes after an action and before the next one, tool results included."""
        probe = [{"role": "user", "content": _USER}, {"role": "assistant", "content": _ACTION}]
        full = self._render([*probe, *messages], (), add_generation_prompt=True)
        glue = full[full.index(_ACTION) + len(_ACTION):]
        # the model sampled the end of turn itself: it is part of its action, not of the glue
        return glue.removeprefix(self.end_of_turn) if action_closed else glue

    @property
    def opens_with_bos(self) -> bool:
        """Whether the template opens the conversation with the tokenizer's BOS (`bos_token`, which
        Hugging Face's `apply_chat_template` passes in: Llama 3, Mistral, Gemma). The format's text never
        holds it (a format knows no tokenizer): `formats.bos_text` is what the caller puts in front."""
        return _opens_with_bos(self.template)

    @property
    def call_openers(self) -> tuple[str, ...]:
        """Where a call may start in an action (its parser's): the text before the first is prose."""
        return self.calls.call_openers

    def parse(self, text: str) -> ParsedAction:
        return self.calls.parse(text)

    def action_message(self, text: str) -> dict[str, Any]:
        """An action as an OpenAI assistant message: prose in `content`, calls in `tool_calls`. An
        action with a call that does not parse is all `content`, as OpenAI-compatible servers return it."""
        parsed = self.parse(text)
        text = text.removesuffix(self.end_of_turn)
        content = text if parsed.errors else self.calls.prose(text)
        message: dict[str, Any] = {"role": "assistant", "content": content}
        if parsed.tool_calls and not parsed.errors:
            message["tool_calls"] = [
                {"id": f"call_{i}", "type": "function",
                 "function": {"name": c.name, "arguments": json.dumps(dict(c.arguments))}}
                for i, c in enumerate(parsed.tool_calls)
            ]
        return message

    def _render(self, messages: Sequence[Mapping], tools: Sequence[Mapping], add_generation_prompt: bool) -> str:
        return _compiled(self.template).render(
            messages=[to_openai_message(m, self.json_arguments) for m in messages], tools=list(tools) or None,
            add_generation_prompt=add_generation_prompt,
        )


class CallParser(Protocol):
    call_openers: tuple[str, ...]  # where a call may start: the text before the first is prose

    def parse(self, text: str) -> ParsedAction: ...

    def prose(self, text: str) -> str:
        """The text in front of the calls."""
        ...


def to_openai_message(message: Mapping, json_arguments: bool = True) -> dict[str, Any]:
    """Tool-call arguments as JSON strings, as the OpenAI API sends them (or as mappings,
    `json_arguments=False`); other messages unchanged."""
    if not message.get("tool_calls"):
        return dict(message)
    calls = []
    for i, call in enumerate(message["tool_calls"]):
        fn = call.get("function", call)
        args = fn["arguments"] if isinstance(fn["arguments"], str) else json.dumps(fn["arguments"])
        args = args if json_arguments else _as_mapping(args)
        calls.append({"id": call.get("id", f"call_{i}"), "type": "function", "function": {"name": fn["name"], "arguments": args}})
    return {**message, "tool_calls": calls}


def _as_mapping(arguments: str) -> Any:
    try:
        return json.loads(arguments)
    except json.JSONDecodeError:  # not JSON: the template shows the string as it is
        return arguments


@functools.lru_cache(maxsize=16)
def _opens_with_bos(template: str) -> bool:
    probe = "\x00bos-probe\x00"
    text = _compiled(template).render(messages=[{"role": "user", "content": _USER}], tools=None,
                                      add_generation_prompt=True, bos_token=probe)
    return text.startswith(probe)


@functools.lru_cache(maxsize=8)
def _compiled(template: str):
    """Compiled as transformers compiles chat templates: sandboxed, trimmed blocks, JSON that does not
    escape HTML characters."""
    from jinja2.ext import loopcontrols
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.filters["tojson"] = lambda x, ensure_ascii=False, indent=None, separators=None, sort_keys=False: json.dumps(
        x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)
    return env.from_string(template)
