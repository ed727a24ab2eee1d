"""Server-sent events for `stream: true`: a finished chat completion as OpenAI's chunk stream.

The batching worker decodes whole replies (a batch's rows are sampled together, `server.py`), so a
reply is streamed once it is sampled: the chunks come at once rather than token by token. Their
shape is OpenAI's, which every client parses alike: a first chunk with the role, the content, each
tool call as a delta that opens it (index, id, name) and one that carries its arguments, a last
chunk with `finish_reason`, then, with `stream_options.include_usage`, a chunk with no choices and
the usage (every other chunk's `usage` null), and `data: [DONE]`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator


def sse(events: Iterable[dict], named: bool = False) -> Iterator[str]:
    """`data: {json}` lines (`named`: each after `event: {type}`, as the Responses API sends them)."""
    for event in events:
        head = f"event: {event['type']}\n" if named else ""
        yield f"{head}data: {json.dumps(event)}\n\n"


def _chunk(reply: dict, choices: list[dict], include_usage: bool) -> dict:
    out = {"id": reply["id"], "object": "chat.completion.chunk", "created": reply["created"], "model": reply["model"],
           "choices": choices}
    return {**out, "usage": None} if include_usage else out


def _choice_deltas(choice: dict) -> Iterator[dict]:
    """One choice's deltas in order; the last carries the finish reason (and our token-id extension)."""
    index, message = choice["index"], choice["message"]
    yield {"index": index, "delta": {"role": "assistant", "content": ""}, "logprobs": None, "finish_reason": None}
    if message.get("content"):
        yield {"index": index, "delta": {"content": message["content"]}, "logprobs": choice.get("logprobs"),
               "finish_reason": None}
    elif choice.get("logprobs"):
        yield {"index": index, "delta": {}, "logprobs": choice["logprobs"], "finish_reason": None}
    for i, call in enumerate(message.get("tool_calls") or ()):
        fn = call["function"]
        yield {"index": index, "delta": {"tool_calls": [{"index": i, "id": call["id"], "type": "function",
                                                         "function": {"name": fn["name"], "arguments": ""}}]},
               "logprobs": None, "finish_reason": None}
        yield {"index": index, "delta": {"tool_calls": [{"index": i, "function": {"arguments": fn["arguments"]}}]},
               "logprobs": None, "finish_reason": None}
    extra = {k: v for k, v in choice.items() if k in ("prompt_token_ids", "token_ids", "token_logprobs")}
    yield {"index": index, "delta": {}, "logprobs": None, "finish_reason": choice["finish_reason"], **extra}


def chat_chunks(reply: dict, include_usage: bool) -> Iterator[dict]:
    """The chunks of a finished chat completion `reply` (the non-streamed body), choice after choice."""
    for choice in reply["choices"]:
        for delta in _choice_deltas(choice):
            yield _chunk(reply, [delta], include_usage)
    if include_usage:
        yield {**_chunk(reply, [], False), "usage": reply["usage"]}


def chat_stream(reply: dict, include_usage: bool) -> Iterator[str]:
    yield from sse(chat_chunks(reply, include_usage))
    yield "data: [DONE]\n\n"
