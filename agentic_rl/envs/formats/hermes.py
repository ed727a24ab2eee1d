"""The hermes format is ChatML (SmolLM2's own) with tools: schemas inside ``<tools>`` in the system
turn, calls as ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` in the assistant turn,
results as ``<tool_response>`` blocks inside a user turn. Every piece is rendered from the message
alone, so a conversation's text is the concatenation of its pieces (prefix-preserving): the rollout
can append observation glue as tokens and the result equals a full render.

Pure strings, no torch: envs and tools must import in a sandbox worker without a model.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from agentic_rl.envs.formats.base import IM_END, IM_START, ParsedAction
from agentic_rl.types import ToolCall

TOOL_CALL_OPEN, TOOL_CALL_CLOSE = "<tool_call>", "</tool_call>"

_TOOLS_PREAMBLE = (
    "\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>"
)
_TOOLS_FOOTER = (
    "\n</tools>\n\nFor each function call, return a json object with function name and arguments "
    "within <tool_call></tool_call> XML tags:\n<tool_call>\n"
    '{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>'
)
_CALL_RE = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)


@dataclass(frozen=True)
class HermesFormat:
    name: str = "hermes"
    stop_strings: tuple[str, ...] = (TOOL_CALL_CLOSE,)
    end_of_turn: str = IM_END
    default_system: str = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"
    extra: Mapping[str, Any] = field(default_factory=dict)
    call_openers = (TOOL_CALL_OPEN,)  # the text before the first is prose, whatever follows

    # ---------------------------------------------------------------- rendering
    def render_system(self, content: str, tools: Sequence[Mapping] = ()) -> str:
        text = f"{IM_START}system\n{content}"
        if tools:
            text += _TOOLS_PREAMBLE + "".join("\n" + json.dumps(t) for t in tools) + _TOOLS_FOOTER
        return text + f"{IM_END}\n"

    def render_assistant_body(self, message: Mapping) -> str:
        """The text the policy itself produces for an assistant message (without the turn markers)."""
        body = message.get("content") or ""
        for call in message.get("tool_calls") or ():
            fn = call.get("function", call)
            args = fn["arguments"] if isinstance(fn["arguments"], str) else json.dumps(fn["arguments"])
            body += f'\n{TOOL_CALL_OPEN}\n{{"name": "{fn["name"]}", "arguments": {args}}}\n{TOOL_CALL_CLOSE}'
        return body

    def render_message(self, message: Mapping, tools: Sequence[Mapping] = ()) -> str:
        role = message["role"]
        if role == "system":
            return self.render_system(message["content"], tools)
        if role == "assistant":
            return f"{IM_START}assistant\n{self.render_assistant_body(message)}{IM_END}\n"
        if role == "tool":
            return self.tool_turn([message])
        return f"{IM_START}{role}\n{message['content']}{IM_END}\n"

    def tool_block(self, content: str) -> str:
        return f"\n<tool_response>\n{content}\n</tool_response>"

    def tool_turn(self, messages: Sequence[Mapping]) -> str:
        return f"{IM_START}user{''.join(self.tool_block(m['content']) for m in messages)}{IM_END}\n"

    def generation_prompt(self) -> str:
        return f"{IM_START}assistant\n"

    def render_prompt(self, messages: Sequence[Mapping], tools: Sequence[Mapping] = ()) -> str:
        """The whole conversation so far, ending where the next assistant action starts."""
        if not messages or messages[0]["role"] != "system":
            messages = [{"role": "system", "content": self.default_system}, *messages]
        return self.render_turns(messages, tools) + self.generation_prompt()

    def render_turns(self, messages: Sequence[Mapping], tools: Sequence[Mapping] = ()) -> str:
        """Messages as turns: consecutive tool results share one user turn, any other message is a
        turn of its own (a user simulator's reply to the agent, in a conversation env)."""
        text, i = "", 0
        while i < len(messages):
            if messages[i]["role"] == "tool":  # consecutive tool results share one user turn
                j = i
                while j < len(messages) and messages[j]["role"] == "tool":
                    j += 1
                text += self.tool_turn(messages[i:j])
                i = j
                continue
            text += self.render_message(messages[i], tools)
            i += 1
        return text

    def render_observation(self, messages: Sequence[Mapping], action_closed: bool) -> str:
        """Glue between two actions: close the assistant turn if the model did not, show the tool
        results (or a user's reply), open the next assistant turn. `action_closed`: the action ended with <|im_end|>."""
        head = "\n" if action_closed else f"{IM_END}\n"
        return head + self.render_turns(messages) + self.generation_prompt()

    # ---------------------------------------------------------------- parsing
    def prose(self, text: str) -> str:
        """The text in front of the calls."""
        return text.split(TOOL_CALL_OPEN, 1)[0].rstrip("\n")

    def parse(self, text: str) -> ParsedAction:
        """Tool calls in an action. Never raises: malformed calls become error strings."""
        calls: list[ToolCall] = []
        errors: list[str] = []
        bodies = _CALL_RE.findall(text)
        tail = text.rsplit(TOOL_CALL_CLOSE, 1)[-1]
        if TOOL_CALL_OPEN in tail:
            errors.append("tool call not closed: end it with </tool_call>")
        for body in bodies:
            try:
                calls.extend(_parse_call_body(body))
            except ValueError as e:
                errors.append(str(e))
        return ParsedAction(tuple(calls), tuple(errors), attempted=bool(bodies) or bool(errors))


def _parse_call_body(body: str) -> list[ToolCall]:
    try:
        payload = json.loads(body.strip())
    except (json.JSONDecodeError, RecursionError) as e:
        raise ValueError(f"tool call is not valid JSON ({short_error(e)})") from None
    items = payload if isinstance(payload, list) else [payload]
    if not items:
        raise ValueError("empty tool call list")
    return [to_call(item) for item in items]


def to_call(item: Any) -> ToolCall:
    if not isinstance(item, dict):
        raise ValueError('a tool call must be a JSON object {"name": ..., "arguments": {...}}')
    name = item.get("name")
    if not isinstance(name, str) or not name:
        raise ValueError('tool call has no "name"')
    args = item.get("arguments", {})
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except (json.JSONDecodeError, RecursionError):
            raise ValueError(f'"arguments" of {name} is not a JSON object') from None
    if not isinstance(args, dict):
        raise ValueError(f'"arguments" of {name} must be a JSON object')
    return ToolCall(name=name, arguments=args)


def short_error(error: Exception) -> str:
    return str(error).split(":")[0][:80]


HERMES = HermesFormat()
