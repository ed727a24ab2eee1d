"""Server-sent events for `stream: true`: a chat completion as OpenAI's chunk stream, sent as its
tokens are sampled.

The batching worker reports each row's tokens as the engine samples them (`on_token`, `server.py`);
`ContentStream` turns them into the content that can be sent at once: decoded incrementally, an
incomplete UTF-8 character held back until its bytes come, and so is what might still turn out not to
be content: the text from a call's opening on (`call_openers`: a call's delta goes out once the reply
is parsed), a request's stop string (cut from the text), the end of turn, the tail that could begin
one of those, and trailing whitespace (trimmed before a call). So what is sent is always a prefix of
the finished reply's content, and the rest goes with the last chunks.

The chunks are OpenAI's, which every client parses alike: a first chunk with the role, the content
deltas, each tool call as a delta that opens it (index, id, name) and one that carries its
arguments, a last chunk with `finish_reason`, then, with `stream_options.include_usage`, a chunk with
no choices and the usage (every other chunk's `usage` null), and `data: [DONE]`.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterable, Iterator

_INCOMPLETE = "\ufffd"  # what a decoder shows for the first bytes of a character still to come


def sse(events: Iterable[dict], named: bool = False) -> Iterator[str]:
    """`data: {json}` lines (`named`: each after `event: {type}`, as the Responses API sends them)."""
    for event in events:
        yield event_line(event, named)


def event_line(event: dict, named: bool = False) -> str:
    head = f"event: {event['type']}\n" if named else ""
    return f"{head}data: {json.dumps(event)}\n\n"


def safe_prefix(text: str, holds: Iterable[str]) -> str:
    """The part of `text` (a reply so far) that stays content whatever comes next: the text before
    the first of `holds` (a call's opening, a stop string, the end of turn), less a tail that could
    begin one of them, less trailing whitespace."""
    holds = [h for h in holds if h]
    cut = min([text.index(h) for h in holds if h in text], default=len(text))
    head = text[:cut]
    tail = max([k for h in holds for k in range(1, min(len(h), len(head) + 1)) if head.endswith(h[:k])], default=0)
    return head[: len(head) - tail].rstrip()


class ContentStream:
    """One reply's content as its tokens come (`push`): each call returns the text that may be sent
    now, "" when nothing new is certain. `forced`: the ids fed before the reply (a forced call's
    opening, which `reply_message` reads as the reply's start); `room`: the tokens that may be sent
    (an episode's budget: what runs past it is never shown)."""

    def __init__(self, tokenizer, holds: Iterable[str], eos_ids, forced: Iterable[int] = (), room: int | None = None):
        self.tokenizer, self.holds, self.eos_ids = tokenizer, tuple(holds), eos_ids
        self.ids, self.sent, self.left = list(forced), "", room

    def push(self, token: int) -> str:
        if self.left is not None:
            if self.left <= 0:
                return ""
            self.left -= 1
        if token in self.eos_ids:  # the end of turn is no content
            self.left = 0
            return ""
        self.ids.append(token)
        text = self.tokenizer.decode(self.ids, skip_special_tokens=False).rstrip(_INCOMPLETE)
        safe = safe_prefix(text, self.holds)
        if len(safe) <= len(self.sent) or not safe.startswith(self.sent):
            return ""
        delta, self.sent = safe[len(self.sent):], safe
        return delta


def _chunk(head: dict, choices: list[dict], include_usage: bool) -> dict:
    out = {**head, "object": "chat.completion.chunk", "choices": choices}
    return {**out, "usage": None} if include_usage else out


def _head(reply: dict) -> dict:
    return {"id": reply["id"], "created": reply["created"], "model": reply["model"]}


def role_delta(index: int) -> dict:
    return {"index": index, "delta": {"role": "assistant", "content": ""}, "logprobs": None, "finish_reason": None}


def content_delta(index: int, text: str, logprobs=None) -> dict:
    return {"index": index, "delta": {"content": text}, "logprobs": logprobs, "finish_reason": None}


def _choice_deltas(choice: dict, sent: str = "") -> Iterator[dict]:
    """A finished choice's deltas after the role and the `sent` content; the last carries the finish
    reason (and our token-id extension), and the logprobs go with the rest of the content."""
    index, message = choice["index"], choice["message"]
    rest = (message.get("content") or "")[len(sent):]
    if rest:
        yield content_delta(index, rest, choice.get("logprobs"))
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


def chat_chunks(reply: dict, include_usage: bool, sent: dict[int, str] | None = None) -> Iterator[dict]:
    """The chunks of a finished chat completion `reply` (the non-streamed body), choice after choice;
    `sent`: the content already streamed per choice (whose role chunk went first)."""
    for choice in reply["choices"]:
        if sent is None:
            yield _chunk(_head(reply), [role_delta(choice["index"])], include_usage)
        for delta in _choice_deltas(choice, (sent or {}).get(choice["index"], "")):
            yield _chunk(_head(reply), [delta], include_usage)
    if include_usage:
        yield {**_chunk(_head(reply), [], False), "usage": reply["usage"]}


def chat_stream(reply: dict, include_usage: bool) -> Iterator[str]:
    yield from sse(chat_chunks(reply, include_usage))
    yield "data: [DONE]\n\n"


async def live_tokens(tokens: asyncio.Queue, done: asyncio.Future) -> AsyncIterator[tuple[int, int]]:
    """(choice, token) as the engine samples them, until `done` (the finished reply) resolves; the
    tokens reported before it are all yielded first (they are queued before it resolves)."""
    while not done.done() or not tokens.empty():
        if tokens.empty():
            getter = asyncio.ensure_future(tokens.get())
            await asyncio.wait([getter, done], return_when=asyncio.FIRST_COMPLETED)
            if not getter.done():
                getter.cancel()
                continue
            yield getter.result()
        else:
            yield tokens.get_nowait()


def error_event(e: Exception) -> dict:
    """A failure after the stream began (its status was sent): OpenAI's error body as a chunk, which the
    `openai` client raises as an `APIError`."""
    status = getattr(e, "status_code", 500)
    return {"error": {"message": str(getattr(e, "detail", e)), "type": "invalid_request_error" if status < 500
                      else "server_error", "param": None, "code": status}}


async def chat_live(head: dict, streams: dict[int, ContentStream], tokens: asyncio.Queue, done: asyncio.Future,
                    include_usage: bool) -> AsyncIterator[str]:
    """A chat completion's events as it is sampled: the role chunks, each choice's content as its
    `streams` release it, then the finished reply's (`done`) remaining chunks and `[DONE]`."""
    for index in streams:
        yield event_line(_chunk(head, [role_delta(index)], include_usage))
    async for index, token in live_tokens(tokens, done):
        if text := streams[index].push(token):
            yield event_line(_chunk(head, [content_delta(index, text)], include_usage))
    try:
        reply = {**await asyncio.shield(done), **head}  # the client leaving does not stop its recording
    except Exception as e:  # noqa: BLE001 - e.g. a reply past the episode's budget, refused
        yield event_line(error_event(e))
        return
    for chunk in chat_chunks(reply, include_usage, {i: s.sent for i, s in streams.items()}):
        yield event_line(chunk)
    yield "data: [DONE]\n\n"
