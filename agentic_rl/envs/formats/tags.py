"""The tag protocol of Search-R1 and ReTool: the action is an XML-ish tag, the result is inserted in
the same assistant turn inside a result tag, and generation stops at the closing action tag.

    <think>I need the founder of Vorel.</think>
    <search>founder of Vorel</search>            <- sampled; generation stops at </search>
    <information>Doc 1 (Vorel): ...</information> <- inserted by the env, never trained
    <think>...</think><answer>Kesa Dumar</answer><|im_end|>

The turn is ChatML (SmolLM2's own markers). Each action tag maps to one tool with one string argument,
so an env is still a `ToolEnv` of typed functions; only the wire format differs from hermes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from agentic_rl.envs.formats.base import IM_END, IM_START, ParsedAction
from agentic_rl.types import ToolCall


@dataclass(frozen=True)
class TagAction:
    """`<tag>body</tag>` calls `tool(argument=body)`; the result comes back in `<result_tag>`."""

    tag: str
    tool: str
    argument: str
    result_tag: str
    instruction: str  # one sentence for the system prompt: when and how to use this action


@dataclass(frozen=True)
class TagFormat:
    name: str
    actions: tuple[TagAction, ...]
    answer_tag: str = "answer"
    end_of_turn: str = IM_END
    default_system: str = "You are a helpful assistant."

    @property
    def stop_strings(self) -> tuple[str, ...]:
        return tuple(f"</{a.tag}>" for a in self.actions)

    # ---------------------------------------------------------------- rendering
    def render_system(self, content: str, tools: Sequence[Mapping] = ()) -> str:
        offered = {_tool_name(t) for t in tools}
        lines = [a.instruction for a in self.actions if a.tool in offered]
        protocol = (
            "\n\nThink step by step inside <think></think>. " + " ".join(lines)
            + f" Give the final answer inside <{self.answer_tag}></{self.answer_tag}>."
        )
        return f"{IM_START}system\n{content}{protocol}{IM_END}\n"

    def render_assistant_body(self, message: Mapping) -> str:
        body = message.get("content") or ""
        for call in message.get("tool_calls") or ():
            fn = call.get("function", call)
            args = json.loads(fn["arguments"]) if isinstance(fn["arguments"], str) else fn["arguments"]
            action = self._action_for_tool(fn["name"])
            sep = "\n" if body and not body.endswith("\n") else ""
            body += f"{sep}<{action.tag}>{args[action.argument]}</{action.tag}>"
        return body

    def result_block(self, message: Mapping) -> str:
        tool = message.get("name", "")
        tag = next((a.result_tag for a in self.actions if a.tool == tool), self.actions[0].result_tag)
        return f"\n\n<{tag}>{message['content']}</{tag}>\n\n"

    def render_observation(self, messages: Sequence[Mapping], action_closed: bool) -> str:
        """Results continue the same assistant turn. If the model ended its turn anyway (an unclosed
        tag followed by end-of-turn), a new assistant turn carries the error."""
        head = f"\n{IM_START}assistant\n" if action_closed else ""
        return head + "".join(self.result_block(m) for m in messages)

    def render_prompt(self, messages: Sequence[Mapping], tools: Sequence[Mapping] = ()) -> str:
        if not messages or messages[0]["role"] != "system":
            messages = [{"role": "system", "content": self.default_system}, *messages]
        text, open_turn = "", False
        for i, m in enumerate(messages):
            role = m["role"]
            following = messages[i + 1]["role"] if i + 1 < len(messages) else None
            if role not in ("assistant", "tool"):
                text += self.render_system(m["content"], tools) if role == "system" else (
                    f"{IM_START}{role}\n{m['content']}{IM_END}\n")
                continue
            if not open_turn:
                text, open_turn = text + f"{IM_START}assistant\n", True
            text += self.render_assistant_body(m) if role == "assistant" else self.result_block(m)
            # actions and their results alternate inside one turn; it ends after an action with no
            # result, or before a non-assistant message. A trailing result leaves it open for the next action.
            if (role == "assistant" and following != "tool") or following not in ("assistant", "tool", None):
                text, open_turn = text + f"{IM_END}\n", False
        return text if open_turn else text + f"{IM_START}assistant\n"

    # ---------------------------------------------------------------- parsing
    def parse(self, text: str) -> ParsedAction:
        calls: list[ToolCall] = []
        errors: list[str] = []
        tags = "|".join(re.escape(a.tag) for a in self.actions)
        for match in re.finditer(rf"<({tags})>(.*?)</\1>", text, re.DOTALL):
            action = self._action_for_tag(match.group(1))
            body = match.group(2).strip()
            if body:
                calls.append(ToolCall(action.tool, {action.argument: body}))
            else:
                errors.append(f"<{action.tag}> is empty: put the {action.argument} between the tags")
        tail = re.split(rf"</(?:{tags})>", text)[-1]
        unclosed = re.search(rf"<({tags})>", tail)
        if unclosed:
            errors.append(f"<{unclosed.group(1)}> not closed: end it with </{unclosed.group(1)}>")
        return ParsedAction(tuple(calls), tuple(errors), attempted=bool(calls or errors))

    def _action_for_tag(self, tag: str) -> TagAction:
        return next(a for a in self.actions if a.tag == tag)

    def _action_for_tool(self, tool: str) -> TagAction:
        for a in self.actions:
            if a.tool == tool:
                return a
        raise ValueError(f"format {self.name} has no tag for tool {tool!r}; tags: {[a.tag for a in self.actions]}")


def _tool_name(schema: Mapping) -> str:
    return schema.get("function", schema).get("name", "")


SEARCH_R1 = TagFormat(
    name="search_r1",
    actions=(
        TagAction(
            tag="search", tool="search", argument="query", result_tag="information",
            instruction="If you lack knowledge, search by writing <search>query</search>; the top "
            "results appear between <information> and </information>. You can search as often as you want.",
        ),
    ),
)
RETOOL = TagFormat(
    name="retool",
    actions=(
        TagAction(
            tag="code", tool="python", argument="code", result_tag="interpreter",
            instruction="To compute, write Python code between <code> and </code>; it runs in a "
            "sandbox that keeps variables between calls, and what it prints appears between "
            "<interpreter> and </interpreter>.",
        ),
    ),
)
