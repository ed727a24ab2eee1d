"""The OpenAI chat-completions fields our server reads, checked once into a frozen record.

Every field a client may send is either read here (`ChatOptions`), refused with a 400 that names
it (`REFUSED`, and the checks in `chat_options`), or ignored (it changes nothing we sample: `user`,
`metadata`, ...): a client never gets a 500, nor a reply that silently did less than it asked.
docs/proxy.md, "The API surface", is the table of all of them.

`tool_choice` `required` or a named function is honoured by writing the call's opening into the
prompt (`tool_opening`): the opening is fed, never sampled, so it is prompt tokens (masked) and
the model samples the rest of the call from there; nothing is constrained or resampled, so the
tokens trained are exactly the tokens sampled.

Pure strings, no torch, no fastapi.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from agentic_rl.envs.formats import call_action


class BadRequest(Exception):
    """A request the server refuses (HTTP 400), with the field it names (OpenAI's `param`)."""

    def __init__(self, param: str, message: str):
        super().__init__(f"{param}: {message}")
        self.param = param


@dataclass(frozen=True)
class ToolChoice:
    mode: str = "auto"  # auto | none | required | function
    name: str = ""  # the function, for mode "function"


@dataclass(frozen=True)
class ChatOptions:
    n: int = 1
    logprobs: bool = False
    stream: bool = False
    include_usage: bool = False
    tool_choice: ToolChoice = ToolChoice()
    stop: tuple[str, ...] = ()
    seed: int | None = None
    max_tokens: int | None = None  # None: the server's default


def _falsy(value: Any) -> bool:
    return not value


def _text_format(value: Any) -> bool:
    return value is None or value == {"type": "text"}


# field -> (accepted(value), why a value it does not accept is refused)
REFUSED: dict[str, tuple[Callable[[Any], bool], str]] = {
    "response_format": (_text_format, "only {\"type\": \"text\"}: no constrained decoding here (it would sample "
                                      "from a distribution the trainer does not compute)"),
    "logit_bias": (_falsy, "not supported: it changes the sampled distribution away from the policy's"),
    "presence_penalty": (_falsy, "not supported (only 0): it changes the sampled distribution away from the policy's"),
    "frequency_penalty": (_falsy, "not supported (only 0): it changes the sampled distribution away from the policy's"),
    "repetition_penalty": (lambda v: v in (None, 1, 1.0), "not supported (only 1)"),
    "functions": (lambda v: v is None, "the legacy functions API is not supported: send tools"),
    "function_call": (lambda v: v is None, "the legacy functions API is not supported: send tool_choice"),
    "audio": (lambda v: v is None, "not supported: text only"),
    "modalities": (lambda v: v in (None, ["text"]), "only [\"text\"]"),
    "prediction": (lambda v: v is None, "predicted outputs are not supported"),
    "web_search_options": (lambda v: v is None, "not supported: this server searches nothing"),
    "store": (_falsy, "this server stores no completions"),
    "reasoning_effort": (lambda v: v is None, "not supported: the model's reasoning is not steerable here"),
    "verbosity": (lambda v: v is None, "not supported"),
    "logprobs": (lambda v: v is None or isinstance(v, bool), "true or false"),
}


def check_fields(body: Mapping, refused: Mapping[str, tuple[Callable[[Any], bool], str]]) -> None:
    for name, (accepted, why) in refused.items():
        if name not in body:
            continue
        try:
            ok = accepted(body[name])
        except (TypeError, AttributeError, ValueError):  # a value of another shape altogether
            ok = False
        if not ok:
            raise BadRequest(name, why)


def text_messages(messages: list) -> list[dict]:
    """Chat messages whose content is a list of text parts (`{"type": "text", "text": ...}`), as
    some clients send them, with that text as a string; any other part is refused."""
    out = []
    for i, m in enumerate(messages):
        content = m.get("content")
        if isinstance(content, list):
            if not all(isinstance(p, Mapping) and p.get("type") == "text" for p in content):
                raise BadRequest(f"messages[{i}].content", "text parts only: no images, audio or files")
            m = {**m, "content": "".join(str(p.get("text", "")) for p in content)}
        out.append(m)
    return out


def _int(body: Mapping, name: str, low: int) -> int | None:
    value = body.get(name)
    if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < low):
        raise BadRequest(name, f"an integer >= {low}")
    return value


def stop_strings(value: Any, param: str = "stop") -> tuple[str, ...]:
    stop = [value] if isinstance(value, str) else (value or [])
    if not isinstance(stop, list) or not all(isinstance(s, str) and s for s in stop):
        raise BadRequest(param, "a string or a list of non-empty strings")
    return tuple(stop)


def tool_choice(value: Any, tools: list | None) -> ToolChoice:
    """The chat API's `tool_choice`: "auto", "none", "required" or {"type": "function", "function":
    {"name": ...}}; a choice that needs tools is refused without them, a named one not among them too."""
    names = [fn.get("name") for t in tools or () if isinstance(t, Mapping)
             and isinstance(fn := t.get("function", t), Mapping)]
    if value is None or value == "auto":
        return ToolChoice()
    if value == "none":
        return ToolChoice("none")
    if value == "required":
        choice = ToolChoice("required")
    elif isinstance(value, Mapping) and value.get("type") == "function" and isinstance(value.get("function"), Mapping):
        choice = ToolChoice("function", str(value["function"].get("name")))
    else:
        raise BadRequest("tool_choice", 'one of "auto", "none", "required" or {"type": "function", '
                                        '"function": {"name": ...}}')
    if not names:
        raise BadRequest("tool_choice", f"{value!r} needs tools, and the request has none")
    if choice.mode == "function" and choice.name not in names:
        raise BadRequest("tool_choice", f"no tool named {choice.name!r} among the request's tools {names}")
    return choice


def chat_options(body: Mapping, recording: bool = False, one_call_a_reply: bool = True) -> ChatOptions:
    """The request's options, or `BadRequest` naming the first field refused. `recording`: one reply a
    call (`n` > 1 is refused: an episode is one trajectory). `one_call_a_reply`: the format's calls
    end at a stop string, so a reply holds one call at most (`parallel_tool_calls: false` holds)."""
    check_fields(body, REFUSED)
    n = _int(body, "n", 1) or 1
    if n > 128:
        raise BadRequest("n", "at most 128, as OpenAI allows")
    if recording and n > 1:
        raise BadRequest("n", "a recorded episode samples one reply a call (an episode is one trajectory): "
                              "send n requests, or run n episodes")
    if _int(body, "top_logprobs", 0):
        raise BadRequest("top_logprobs", "only 0: the engine gives the sampled tokens' logprobs, not the top-k")
    if body.get("parallel_tool_calls") is False and not one_call_a_reply:
        raise BadRequest("parallel_tool_calls", "false is not enforceable in this format (a reply may hold "
                                                "several calls, and nothing constrains the sampling)")
    stream_options = body.get("stream_options") or {}
    if not isinstance(stream_options, Mapping):
        raise BadRequest("stream_options", "an object")
    max_tokens = _int(body, "max_completion_tokens", 1) or _int(body, "max_tokens", 1)
    seed = _int(body, "seed", 0)
    if seed is not None and seed + n > 2**63:
        raise BadRequest("seed", "below 2**63")
    return ChatOptions(n=n, logprobs=bool(body.get("logprobs")), stream=bool(body.get("stream")),
                       include_usage=bool(stream_options.get("include_usage")),
                       tool_choice=tool_choice(body.get("tool_choice"), body.get("tools")),
                       stop=stop_strings(body.get("stop")), seed=seed, max_tokens=max_tokens)


_ARG, _NAMES = "agentic_rl_probe_argument", ("A_probe", "B_probe")  # ASCII: JSON escapes nothing of them


def tool_opening(fmt, choice: ToolChoice) -> str:
    """The text a reply starts with so it is a call (`required`) or a call of `choice.name`: the
    format's own rendering of a call, up to where the model's choice begins (the tool's name for
    `required`, the arguments for a named function); "" when the choice forces nothing."""
    if choice.mode == "required":
        a, b = (call_action(fmt, name) for name in _NAMES)
        return os.path.commonprefix([a, b])
    if choice.mode == "function":
        text = call_action(fmt, choice.name, **{_ARG: 0})
        return re.sub(r'\{\s*"?$', "", text[: text.index(_ARG)])
    return ""
