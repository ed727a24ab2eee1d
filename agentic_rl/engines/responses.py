"""The Responses API (`POST /v1/responses`) as the chat completions our server already answers.

A request's `input` (a string, or a list of items: messages, `function_call`, `function_call_output`)
and `instructions` become chat messages: the instructions a system message first, a `function_call`
item a tool call of the assistant message just before it (consecutive calls one message, as the
reply that made them), a `function_call_output` a `tool` message. So a reply sent back as the items
it came as is the same assistant message the recorder kept, and is fed as sampled (the token
contract, `recorder.py`). The chat reply becomes output items: a `message` with one `output_text`
when it has prose, then one `function_call` item per call. `stream: true` sends the Responses event
stream as the reply is sampled (`live_events`: the text as it comes, each call once parsed).

Stateless: nothing is stored, so `previous_response_id`, `conversation`, `store: true` and
`background` are refused, as is anything beyond text and function tools (each a 400 naming the field).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Iterator, Mapping
from typing import Any

from agentic_rl.engines.openai_request import REFUSED, BadRequest, check_fields


def _absent(value: Any) -> bool:
    return value is None


def _text_format(value: Any) -> bool:
    return value is None or (isinstance(value, Mapping) and value.get("format", {"type": "text"}) == {"type": "text"})


# field -> (accepted(value), why not); the chat API's refusals apply too (`to_chat`)
RESPONSES_REFUSED = {
    "previous_response_id": (_absent, "this server stores no responses: send the whole conversation as input"),
    "conversation": (_absent, "this server stores no conversations: send the whole conversation as input"),
    "store": (lambda v: not v, "this server stores no responses (send false, or omit it)"),
    "background": (lambda v: not v, "not supported: every response is answered in its request"),
    "prompt": (_absent, "stored prompts are not supported: send instructions and input"),
    "text": (_text_format, 'only {"format": {"type": "text"}}: no constrained decoding here'),
    "reasoning": (lambda v: not v or not any(v.values()), "not supported: the model's reasoning is not steerable"),
    "truncation": (lambda v: v in (None, "disabled"), 'only "disabled": a prompt past the context is refused'),
    "context_management": (_absent, "not supported"),
    "include": (lambda v: not v or set(v) <= {"message.output_text.logprobs"},
                'only ["message.output_text.logprobs"]: there is no reasoning, search or image output'),
}


def _text(content: Any, where: str) -> str:
    """A message's content as text: a string, or parts of type input_text / output_text."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise BadRequest(where, "a string or a list of text parts")
    out = []
    for j, part in enumerate(content):
        if not isinstance(part, Mapping) or part.get("type") not in ("input_text", "output_text", "text"):
            raise BadRequest(f"{where}[{j}]", "only text parts (input_text, output_text): no images or files")
        out.append(str(part.get("text", "")))
    return "".join(out)


def _message(item: Mapping, where: str) -> dict:
    role = item.get("role")
    if role not in ("user", "assistant", "system", "developer"):
        raise BadRequest(f"{where}.role", "user, assistant, system or developer")
    return {"role": "system" if role == "developer" else role, "content": _text(item.get("content"), f"{where}.content")}


def _call(item: Mapping) -> dict:
    return {"id": item["call_id"], "type": "function",
            "function": {"name": item["name"], "arguments": item.get("arguments") or "{}"}}


def input_messages(body: Mapping) -> list[dict]:
    """`instructions` and `input` as chat messages."""
    items = body.get("input")
    items = [{"type": "message", "role": "user", "content": items}] if isinstance(items, str) else items
    if not isinstance(items, list) or not items:
        raise BadRequest("input", "a string or a non-empty list of items")
    out: list[dict] = []
    if body.get("instructions"):
        out.append({"role": "system", "content": _text(body["instructions"], "instructions")})
    for i, item in enumerate(items):
        where, kind = f"input[{i}]", item.get("type", "message") if isinstance(item, Mapping) else None
        try:
            if kind == "message":
                out.append(_message(item, where))
            elif kind == "function_call":
                last = out[-1] if out else None
                if last is None or last["role"] != "assistant":
                    last = {"role": "assistant", "content": None}
                    out.append(last)
                last.setdefault("tool_calls", []).append(_call(item))
            elif kind == "function_call_output":
                output = item["output"]
                out.append({"role": "tool", "tool_call_id": item["call_id"],
                            "content": output if isinstance(output, str) else _text(output, f"{where}.output")})
            else:
                raise BadRequest(f"{where}.type", f"{kind!r} is not supported: message, function_call, "
                                                  "function_call_output")
        except KeyError as e:
            raise BadRequest(where, f"a {kind} item needs {e.args[0]!r}") from None
    return out


def _tools(tools: Any) -> list[dict] | None:
    """Responses function tools (flat: type, name, description, parameters) as chat tools."""
    if tools is None:
        return None
    if not isinstance(tools, list):
        raise BadRequest("tools", "a list of function tools")
    out = []
    for i, tool in enumerate(tools):
        if not isinstance(tool, Mapping) or tool.get("type") != "function" or not tool.get("name"):
            kind = tool.get("type") if isinstance(tool, Mapping) else tool
            raise BadRequest(f"tools[{i}]", f"only function tools with a name ({kind!r}: no hosted tools here)")
        fn = {k: tool[k] for k in ("name", "description", "parameters") if tool.get(k) is not None}
        out.append({"type": "function", "function": fn})
    return out or None


def _tool_choice(value: Any) -> Any:
    if isinstance(value, Mapping) and value.get("type") == "function":
        return {"type": "function", "function": {"name": value.get("name")}}
    if value is None or value in ("auto", "none", "required"):
        return value
    raise BadRequest("tool_choice", 'one of "auto", "none", "required" or {"type": "function", "name": ...}')


def to_chat(body: Mapping) -> dict:
    """The chat-completions body that asks what the Responses `body` asks (`BadRequest` naming the
    first field refused)."""
    check_fields(body, RESPONSES_REFUSED)
    check_fields(body, {k: REFUSED[k] for k in ("logit_bias", "presence_penalty", "frequency_penalty")})
    chat = {"messages": input_messages(body), "tools": _tools(body.get("tools")),
            "tool_choice": _tool_choice(body.get("tool_choice")),
            "logprobs": "message.output_text.logprobs" in (body.get("include") or ()),
            "max_completion_tokens": body.get("max_output_tokens")}
    for name in ("temperature", "top_p", "top_logprobs", "parallel_tool_calls", "seed", "return_token_ids"):
        if body.get(name) is not None:
            chat[name] = body[name]
    return chat


def _usage(usage: Mapping) -> dict:
    return {"input_tokens": usage["prompt_tokens"], "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": usage["completion_tokens"], "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": usage["total_tokens"]}


def output_items(choice: Mapping) -> list[dict]:
    """A chat choice as Responses output items: its prose as a message, each call a function_call."""
    message, items = choice["message"], []
    if message.get("content"):
        logprobs = [{"token": e["token"], "logprob": e["logprob"], "bytes": e["bytes"], "top_logprobs": []}
                    for e in (choice.get("logprobs") or {}).get("content", ())]
        items.append({"type": "message", "id": f"msg_{uuid.uuid4().hex}", "status": "completed", "role": "assistant",
                      "content": [{"type": "output_text", "text": message["content"], "annotations": [],
                                   "logprobs": logprobs}]})
    for call in message.get("tool_calls") or ():
        items.append({"type": "function_call", "id": f"fc_{uuid.uuid4().hex}", "call_id": call["id"],
                      "name": call["function"]["name"], "arguments": call["function"]["arguments"],
                      "status": "completed"})
    return items


def response_head(body: Mapping, model: str) -> dict:
    """What a response to `body` says before its reply is sampled (its id, the request's settings)."""
    return {"id": f"resp_{uuid.uuid4().hex}", "object": "response", "created_at": int(time.time()),
            "status": "in_progress", "incomplete_details": None, "error": None, "model": model,
            "instructions": body.get("instructions"), "output": [],
            "parallel_tool_calls": body.get("parallel_tool_calls", True), "tool_choice": body.get("tool_choice", "auto"),
            "tools": body.get("tools") or [], "temperature": body.get("temperature"), "top_p": body.get("top_p"),
            "max_output_tokens": body.get("max_output_tokens"), "metadata": body.get("metadata") or {},
            "text": {"format": {"type": "text"}}, "truncation": "disabled", "store": False, "usage": None}


def from_chat(reply: Mapping, body: Mapping, head: Mapping | None = None) -> dict:
    """The Responses object of a chat completion `reply` to the Responses request `body` (`head`: the
    one its stream began with)."""
    (choice,) = reply["choices"]
    cut = choice["finish_reason"] == "length"
    out = {**(head or response_head(body, reply["model"])), "status": "incomplete" if cut else "completed",
           "incomplete_details": {"reason": "max_output_tokens"} if cut else None, "output": output_items(choice),
           "usage": _usage(reply["usage"]), "weight_version": reply.get("weight_version")}
    if "token_ids" in choice:
        out.update(prompt_token_ids=choice["prompt_token_ids"], token_ids=choice["token_ids"])
    return out


def _message_opened(index: int, item: dict) -> Iterator[dict]:
    ids = {"item_id": item["id"], "output_index": index, "content_index": 0}
    yield {"type": "response.output_item.added", "output_index": index,
           "item": {**item, "status": "in_progress", "content": []}}
    yield {"type": "response.content_part.added", **ids,
           "part": {"type": "output_text", "text": "", "annotations": [], "logprobs": []}}


def _text_delta(index: int, item_id: str, text: str, logprobs=()) -> dict:
    return {"type": "response.output_text.delta", "item_id": item_id, "output_index": index, "content_index": 0,
            "delta": text, "logprobs": list(logprobs)}


def _item_events(index: int, item: dict, sent: str | None = None) -> Iterator[dict]:
    """One output item's events: added (empty), its text or arguments as one delta, done (whole);
    `sent`: a message's text already streamed (its item and part already added)."""
    if item["type"] == "message":
        part, text = item["content"][0], item["content"][0]["text"]
        if sent is None:
            yield from _message_opened(index, item)
        ids = {"item_id": item["id"], "output_index": index, "content_index": 0}
        if text[len(sent or ""):] or part["logprobs"]:
            yield _text_delta(index, item["id"], text[len(sent or ""):], part["logprobs"])
        yield {"type": "response.output_text.done", **ids, "text": text, "logprobs": part["logprobs"]}
        yield {"type": "response.content_part.done", **ids, "part": part}
    else:
        ids = {"item_id": item["id"], "output_index": index}
        yield {"type": "response.output_item.added", "output_index": index,
               "item": {**item, "status": "in_progress", "arguments": ""}}
        yield {"type": "response.function_call_arguments.delta", **ids, "delta": item["arguments"]}
        yield {"type": "response.function_call_arguments.done", **ids, "name": item["name"],
               "arguments": item["arguments"]}
    yield {"type": "response.output_item.done", "output_index": index, "item": item}


def _finished_events(response: dict, sent: str | None = None) -> Iterator[dict]:
    for i, item in enumerate(response["output"]):
        yield from _item_events(i, item, sent if i == 0 else None)
    done = "response.incomplete" if response["status"] == "incomplete" else "response.completed"
    yield {"type": done, "response": response}


def events(response: dict) -> Iterator[dict]:
    """The Responses event stream of a finished `response`, numbered (`sequence_number`)."""
    start = {**response, "status": "in_progress", "output": [], "usage": None, "incomplete_details": None}
    stream = [{"type": "response.created", "response": start}, {"type": "response.in_progress", "response": start},
              *_finished_events(response)]
    for n, event in enumerate(stream):
        yield {**event, "sequence_number": n}


async def _live(head: dict, body: Mapping, stream, tokens, done) -> AsyncIterator[dict]:
    from agentic_rl.engines.sse import error_event, live_tokens

    yield {"type": "response.created", "response": head}
    yield {"type": "response.in_progress", "response": head}
    item_id = f"msg_{uuid.uuid4().hex}"
    async for _, token in live_tokens(tokens, done):
        if text := stream.push(token):
            if text == stream.sent:  # the first text: the message item opens
                for event in _message_opened(0, {"type": "message", "id": item_id, "role": "assistant"}):
                    yield event
            yield _text_delta(0, item_id, text)
    try:
        response = from_chat(await asyncio.shield(done), body, head)
    except Exception as e:  # noqa: BLE001 - e.g. a reply past the episode's budget, refused
        yield {"type": "error", **error_event(e)["error"]}
        return
    if stream.sent:  # the message the text went to
        response["output"][0]["id"] = item_id
    for event in _finished_events(response, stream.sent or None):
        yield event


async def live_events(head: dict, body: Mapping, stream, tokens, done) -> AsyncIterator[str]:
    """The Responses event stream of a reply as it is sampled (`server.live`: the `ContentStream` of its
    text, the queue of its tokens, the task of the finished chat reply), numbered, as SSE lines: the
    message's text deltas as they come, the rest (function calls, done events) once it is parsed."""
    from agentic_rl.engines.sse import event_line

    n = 0
    async for event in _live(head, body, stream, tokens, done):
        yield event_line({**event, "sequence_number": n}, named=True)
        n += 1
