"""The OpenAI API surface of our server (`engines/server.py`, `openai_request.py`, `sse.py`,
`responses.py`), driven through the `openai` package itself against real uvicorn servers: one over
the tiny model (what it samples is noise: these tests check protocol and tokens, not content), one
over a scripted engine where a reply must hold tool calls (a random model writes none), both in
recording mode so `/episodes/ID/v1` is the same surface with the token contract checked against
the recorder's rows.
"""

from __future__ import annotations

import json

import openai
import pytest

from agentic_rl.engines.hf import HFEngine
from agentic_rl.engines.openai_request import ToolChoice, tool_opening
from agentic_rl.engines.recorder import Recorder
from agentic_rl.engines.scripted import ScriptedEngine
from agentic_rl.engines.server import create_app
from agentic_rl.envs.formats import MISTRAL, format_of_template
from tests.engines.test_served import Server

TOOLS = [{"type": "function", "function": {"name": "calculator", "description": "Evaluate arithmetic.",
                                           "parameters": {"type": "object",
                                                          "properties": {"expression": {"type": "string"}}}}}]
ASK = [{"role": "user", "content": "What is 6*7?"}]
CALL = '<tool_call>\n{"name": "calculator", "arguments": {"expression": "6*7"}}\n</tool_call>'


@pytest.fixture(scope="module")
def tiny_server(tokenizer):
    from agentic_rl.models.loader import tiny_model

    engine = HFEngine(tiny_model(tokenizer, seed=0).eval(), tokenizer, "fp32")
    server = Server(create_app(engine, tokenizer, recorder=Recorder(tokenizer, engine.eos_ids)))
    yield server
    server.stop()


class Script:
    """The scripted engine's replies, in the order they are asked for (`queue` refills it)."""

    def __init__(self):
        self.replies: list[str] = []

    def __call__(self, row: int, turn: int) -> str:
        return self.replies.pop(0)


@pytest.fixture(scope="module")
def scripted(tokenizer):
    """(server, script) for the tokenizer's own format (hermes calls) and for Mistral's, which
    writes several calls in one reply."""
    made = {}
    for name, fmt in (("hermes", None), ("mistral", MISTRAL)):
        script = Script()
        engine = ScriptedEngine(tokenizer, script)
        made[name] = (Server(create_app(engine, tokenizer, recorder=Recorder(tokenizer, engine.eos_ids), fmt=fmt)),
                      script)
    yield made
    for server, _ in made.values():
        server.stop()


def _client(server, episode: str | None = None) -> openai.OpenAI:
    """An `openai` client of `server` (recording under `episode`)."""
    path = f"/episodes/{episode}/v1" if episode else "/v1"
    return openai.OpenAI(base_url=server.url + path, api_key="unused", max_retries=0, timeout=30)


def _trained(server, episode: str) -> list[list[int]]:
    """The episode's rows as the recorder gives them: each row's loss-masked (trained) token ids."""
    import httpx

    rows = httpx.get(f"{server.url}/episodes/{episode}").json()["rows"]
    return [[t for t, m in zip(r["token_ids"], r["loss_mask"]) if m] for r in rows]


def test_a_streamed_chat_is_the_same_reply_in_openai_chunks(tiny_server):
    client = _client(tiny_server)
    whole = client.chat.completions.create(model="m", messages=ASK, max_tokens=6, seed=7,
                                           extra_body={"return_token_ids": True})
    chunks = list(client.chat.completions.create(model="m", messages=ASK, max_tokens=6, seed=7, stream=True,
                                                 stream_options={"include_usage": True},
                                                 extra_body={"return_token_ids": True}))
    assert all(c.object == "chat.completion.chunk" for c in chunks)
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == whole.choices[0].message.content  # the same seed: the same sample
    finals = [c.choices[0] for c in chunks if c.choices and c.choices[0].finish_reason]
    assert [f.finish_reason for f in finals] == ["length"]
    assert finals[0].token_ids == whole.choices[0].token_ids
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == 6
    assert all(c.usage is None for c in chunks[:-1])


def test_n_seed_logprobs_and_max_completion_tokens(tiny_server):
    client = _client(tiny_server)
    ask = {"model": "m", "messages": ASK, "max_completion_tokens": 4, "extra_body": {"return_token_ids": True}}
    three = client.chat.completions.create(n=3, seed=11, logprobs=True, **ask)
    assert [c.index for c in three.choices] == [0, 1, 2] and three.usage.completion_tokens == 12
    # choice i samples from seed + i: the same tokens as a request of that seed alone
    alone = [client.chat.completions.create(seed=11 + i, **ask).choices[0].token_ids for i in range(3)]
    assert [c.token_ids for c in three.choices] == alone and alone[0] != alone[1]
    first = three.choices[0]
    assert [e.logprob for e in first.logprobs.content] == first.token_logprobs
    assert all(e.top_logprobs == [] and e.logprob < 0 for e in first.logprobs.content)
    with pytest.raises(openai.BadRequestError) as refused:
        client.chat.completions.create(logprobs=True, top_logprobs=2, **ask)
    assert refused.value.param == "top_logprobs"


def test_a_stop_string_cuts_the_text_and_the_ids_are_what_was_sampled(tiny_server, tokenizer):
    client = _client(tiny_server)
    ask = {"model": "m", "messages": ASK, "max_tokens": 8, "seed": 5, "extra_body": {"return_token_ids": True}}
    free = client.chat.completions.create(**ask).choices[0]
    stop = tokenizer.decode(free.token_ids[3:4]).strip() or tokenizer.decode(free.token_ids[3:4])
    cut = client.chat.completions.create(stop=[stop], **ask).choices[0]
    # sampling stopped at the token that completed the stop string; the text ends before it
    assert cut.finish_reason == "stop" and cut.token_ids == free.token_ids[: len(cut.token_ids)]
    assert len(cut.token_ids) <= 4 and stop not in (cut.message.content or "")
    assert stop in tokenizer.decode(cut.token_ids)


def test_a_named_tool_choice_feeds_the_calls_opening_and_it_is_not_trained(scripted, tokenizer):
    """tool_choice names a function: its opening is fed after the prompt, the model writes the rest.
    Recorded, the opening is prompt (mask 0); the call sent back with its result extends the
    episode, one row whose trained tokens are exactly the two samples."""
    server, script = scripted["hermes"]
    opening = tool_opening(format_of_template(tokenizer.chat_template), ToolChoice("function", "calculator"))
    script.replies[:] = ['{"expression": "6*7"}}\n</tool_call>', "It is 42.<|im_end|>"]
    client = _client(server, "named")
    first = client.chat.completions.create(model="m", messages=ASK, tools=TOOLS, max_tokens=64,
                                           extra_body={"return_token_ids": True},
                                           tool_choice={"type": "function", "function": {"name": "calculator"}})
    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.tool_calls[0].function.name == "calculator"
    assert json.loads(choice.message.tool_calls[0].function.arguments) == {"expression": "6*7"}
    forced = tokenizer(opening, add_special_tokens=False)["input_ids"]
    assert choice.prompt_token_ids[-len(forced):] == forced
    call = choice.message.tool_calls[0]
    history = [*ASK, choice.message.model_dump(exclude_none=True),
               {"role": "tool", "tool_call_id": call.id, "content": "42"}]
    second = client.chat.completions.create(model="m", messages=history, tools=TOOLS, max_tokens=64,
                                            extra_body={"return_token_ids": True}).choices[0]
    assert _trained(server, "named") == [choice.token_ids + second.token_ids]


def test_tool_choice_none_and_required(scripted):
    server, script = scripted["hermes"]
    client = _client(server)
    script.replies[:] = [CALL]
    none = client.chat.completions.create(model="m", messages=ASK, tools=TOOLS, max_tokens=64, tool_choice="none").choices[0]
    assert none.message.tool_calls is None and none.message.content.startswith("<tool_call>")
    script.replies[:] = ['calculator", "arguments": {"expression": "1+1"}}\n</tool_call>']
    required = client.chat.completions.create(model="m", messages=ASK, tools=TOOLS, max_tokens=64, tool_choice="required").choices[0]
    assert required.message.tool_calls[0].function.name == "calculator"
    with pytest.raises(openai.BadRequestError) as refused:
        client.chat.completions.create(model="m", messages=ASK, tool_choice="required")
    assert refused.value.param == "tool_choice"


def test_parallel_tool_calls_come_back_as_several_calls_and_deltas(scripted):
    server, script = scripted["mistral"]
    client = _client(server)
    calls = '[TOOL_CALLS] [{"name": "calculator", "arguments": {"expression": "1+1"}}, ' \
            '{"name": "calculator", "arguments": {"expression": "2+2"}}]</s>'
    script.replies[:] = [calls, calls]
    whole = client.chat.completions.create(model="m", messages=ASK, tools=TOOLS, max_tokens=64).choices[0]
    assert [json.loads(c.function.arguments)["expression"] for c in whole.message.tool_calls] == ["1+1", "2+2"]
    deltas = [d for c in client.chat.completions.create(model="m", messages=ASK, tools=TOOLS,
                                                                             max_tokens=64, stream=True)
              for d in c.choices[0].delta.tool_calls or ()]
    args: dict[int, str] = {}
    for d in deltas:
        args[d.index] = args.get(d.index, "") + (d.function.arguments or "")
    assert {d.index for d in deltas if d.id} == {0, 1} and [json.loads(a) for a in args.values()] == [
        {"expression": "1+1"}, {"expression": "2+2"}]
    with pytest.raises(openai.BadRequestError) as refused:  # Mistral may write several: false is not enforceable
        client.chat.completions.create(model="m", messages=ASK, tools=TOOLS, parallel_tool_calls=False)
    assert refused.value.param == "parallel_tool_calls"


@pytest.mark.parametrize("field, value", [
    ("response_format", {"type": "json_object"}), ("logit_bias", {"5": 10}), ("presence_penalty", 0.5),
    ("functions", [{"name": "f"}]), ("n", 2), ("store", True), ("tool_choice", "sometimes"), ("stop", [3]),
    ("seed", -1), ("seed", 2**70), ("tools", [{"function": 3}]), ("messages", [{"role": "user", "content": [{"type": "image_url"}]}])])
def test_an_unsupported_chat_field_is_a_400_naming_it(tiny_server, field, value):
    client = _client(tiny_server, "refused")  # recording mode: n > 1 is refused there
    with pytest.raises(openai.BadRequestError) as refused:
        client.chat.completions.create(model="m", messages=ASK, max_tokens=2, extra_body={field: value})
    assert refused.value.param.split("[")[0] == field and field in str(refused.value)
    with pytest.raises(openai.BadRequestError) as refused:  # without recording, too
        _client(tiny_server).chat.completions.create(model="m", messages=ASK, max_tokens=2, n=129)
    assert refused.value.param == "n"


def test_text_parts_are_the_text_they_hold(tiny_server):
    client = _client(tiny_server)
    parts = [{"role": "user", "content": [{"type": "text", "text": "What is "}, {"type": "text", "text": "6*7?"}]}]
    ids = [client.chat.completions.create(model="m", messages=m, max_tokens=1, extra_body={"return_token_ids": True})
           .choices[0].prompt_token_ids for m in (parts, ASK)]
    assert ids[0] == ids[1]


@pytest.mark.parametrize("field, value", [
    ("previous_response_id", "resp_1"), ("store", True), ("tools", [{"type": "web_search"}]),
    ("text", {"format": {"type": "json_object"}}), ("include", ["reasoning.encrypted_content"]),
    ("input", [{"type": "image_generation_call"}]), ("reasoning", "high"), ("input", 3)])
def test_an_unsupported_responses_field_is_a_400_naming_it(tiny_server, field, value):
    body = {"model": "m", "input": "Hi", "max_output_tokens": 2, field: value}
    with pytest.raises(openai.BadRequestError) as refused:
        _client(tiny_server).responses.create(**body)
    assert refused.value.param.split("[")[0] == field


def test_the_responses_api_answers_text_and_streams_its_events(tiny_server):
    client = _client(tiny_server)
    ask = {"model": "m", "input": "What is 6*7?", "instructions": "Answer briefly.", "max_output_tokens": 5}
    whole = client.responses.create(**ask)
    assert whole.status == "incomplete" and whole.incomplete_details.reason == "max_output_tokens"
    assert whole.output[0].type == "message" and whole.output_text == whole.output[0].content[0].text
    assert whole.usage.output_tokens == 5 and whole.usage.total_tokens == whole.usage.input_tokens + 5
    kinds = [e.type for e in client.responses.create(stream=True, **ask)]
    assert kinds[:3] == ["response.created", "response.in_progress", "response.output_item.added"]
    assert "response.output_text.delta" in kinds and kinds[-2:] == ["response.output_item.done", "response.incomplete"]
    with client.responses.stream(**ask) as stream:  # cut at max_output_tokens: incomplete, as OpenAI ends it
        seen = list(stream)
    deltas, last = [e.delta for e in seen if e.type == "response.output_text.delta"], seen[-1]
    assert last.type == "response.incomplete" and "".join(deltas) == last.response.output[0].content[0].text


def test_responses_function_calls_round_trip_as_one_recorded_trajectory(scripted):
    """A Responses episode: the reply's function_call item and its output sent back as items; the
    recorder's row is the two samples, trained tokens exactly the sampled ones, streamed or not."""
    server, script = scripted["hermes"]
    tools = [{"type": "function", "name": "calculator", "description": "Evaluate arithmetic.",
              "parameters": TOOLS[0]["function"]["parameters"]}]
    for stream in (False, True):
        episode = f"responses-{stream}"
        client = _client(server, episode)
        script.replies[:] = ["Let me compute.\n" + CALL, "It is 42.<|im_end|>"]
        ask = {"model": "m", "instructions": "Use the calculator.", "tools": tools, "max_output_tokens": 64,
               "extra_body": {"return_token_ids": True}}
        items: list = [{"role": "user", "content": "What is 6*7?"}]
        sampled = []
        for _ in range(2):
            if stream:
                with client.responses.stream(input=items, **ask) as events:
                    response = events.get_final_response()
            else:
                response = client.responses.create(input=items, **ask)
            sampled += response.token_ids
            items += [o.model_dump(exclude_none=True) for o in response.output]
            items += [{"type": "function_call_output", "call_id": o.call_id, "output": "42"}
                      for o in response.output if o.type == "function_call"]
        kinds = [i["type"] for i in items if "type" in i]
        assert kinds == ["message", "function_call", "function_call_output", "message"]
        assert _trained(server, episode) == [sampled]


def test_a_streamed_chat_episode_records_exactly_the_sampled_tokens(tiny_server):
    client = _client(tiny_server, "streamed")
    messages, sampled = list(ASK), []
    for _ in range(2):
        content, ids = "", []
        for chunk in client.chat.completions.create(model="m", messages=messages, max_tokens=5, stream=True,
                                                    extra_body={"return_token_ids": True}):
            for c in chunk.choices:
                content += c.delta.content or ""
                ids = getattr(c, "token_ids", None) or ids
        sampled += ids
        messages += [{"role": "assistant", "content": content}, {"role": "user", "content": "And again?"}]
    assert len(sampled) == 10 and _trained(tiny_server, "streamed") == [sampled]


class Gate:
    """An engine whose decoding waits before the reply's last token until the client has seen content:
    so the first content chunk must arrive while the engine is still decoding (`reached`: the tokens
    sampled when it arrived). The wait is bounded: a server that sends nothing before the reply is
    done makes the client see content only after every token."""

    def __init__(self, engine, last: int):
        import threading

        self.engine, self.last, self.sampled, self.seen = engine, last, 0, threading.Event()
        self.reached: int | None = None

    def __getattr__(self, name):
        return getattr(self.engine, name)

    def session(self, *args):
        session, gate = self.engine.session(*args), self

        class Gated:
            def run(self, prompts, params, on_stop, max_new=None, on_error=None, **kw):
                hear = kw.pop("on_token", None)

                def counted(row, token):
                    gate.sampled += 1
                    if gate.sampled == gate.last - 1:
                        gate.seen.wait(timeout=20)
                    hear(row, token)
                kw.update(on_token=counted) if hear else None
                session.run(prompts, params, lambda r, s: (setattr(gate, "sampled", gate.last), on_stop(r, s))[1],
                            max_new, on_error, **kw)
        return Gated()

    def saw_content(self) -> None:
        if self.reached is None:
            self.reached = self.sampled
            self.seen.set()


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_a_streamed_reply_arrives_token_by_token_and_is_the_non_streamed_reply(tokenizer, api):
    """The first content chunk reaches the `openai` client while the engine still decodes (the gate
    holds the last token until it has), in more than one chunk, and the chunks concatenate to the
    non-streamed reply of the same seed."""
    from agentic_rl.models.loader import tiny_model

    tokens = 16
    gate = Gate(HFEngine(tiny_model(tokenizer, seed=0).eval(), tokenizer, "fp32"), tokens)
    server = Server(create_app(gate, tokenizer))
    try:
        client = _client(server)
        if api == "chat":
            ask = {"model": "m", "messages": ASK, "max_tokens": tokens, "seed": 3}
            whole = client.chat.completions.create(**ask).choices[0].message.content
            gate.sampled, deltas = 0, []
            for chunk in client.chat.completions.create(stream=True, **ask):
                if chunk.choices and chunk.choices[0].delta.content:
                    gate.saw_content()
                    deltas.append(chunk.choices[0].delta.content)
        else:
            ask = {"model": "m", "input": "What is 6*7?", "max_output_tokens": tokens, "extra_body": {"seed": 3}}
            whole = client.responses.create(**ask).output_text
            gate.sampled, deltas = 0, []
            for event in client.responses.create(stream=True, **ask):
                if event.type == "response.output_text.delta" and event.delta:
                    gate.saw_content()
                    deltas.append(event.delta)
    finally:
        server.stop()
    assert "".join(deltas) == whole and len(whole) > 8
    assert gate.reached is not None and gate.reached < tokens  # content came before the last token
    assert len(deltas) > 1


def test_a_streamed_call_sends_its_prose_first_and_the_call_once_parsed(scripted):
    """A reply with prose and a call: the prose streams as content (never the call's opening), the
    call comes as its deltas, and the content is the non-streamed reply's."""
    server, script = scripted["hermes"]
    client = _client(server)
    script.replies[:] = ["Let me compute that.\n" + CALL] * 2
    whole = client.chat.completions.create(model="m", messages=ASK, tools=TOOLS, max_tokens=64).choices[0]
    chunks = [c.choices[0] for c in client.chat.completions.create(model="m", messages=ASK, tools=TOOLS,
                                                                   max_tokens=64, stream=True) if c.choices]
    contents = [c.delta.content for c in chunks if c.delta.content]
    assert "".join(contents) == whole.message.content == "Let me compute that." and len(contents) > 1
    first_call = next(i for i, c in enumerate(chunks) if c.delta.tool_calls)
    assert all(not c.delta.tool_calls for c in chunks[:first_call]) and "<" not in "".join(contents)
    args = "".join(d.function.arguments or "" for c in chunks for d in c.delta.tool_calls or ())
    assert json.loads(args) == {"expression": "6*7"} and chunks[-1].finish_reason == "tool_calls"


def test_a_streamed_reply_past_the_episodes_budget_shows_only_its_recorded_tokens(tokenizer):
    """Streamed, a reply that runs past the episode's tokens sends the content of the recorded tokens
    at most, then an error event (the `openai` client raises it), as the non-streamed call is a 400."""
    from agentic_rl.engines.recorder import Limits

    script = Script()
    engine = ScriptedEngine(tokenizer, script)
    server = Server(create_app(engine, tokenizer, recorder=Recorder(tokenizer, engine.eos_ids, limits=Limits(0, 4))))
    reply = "one two three four five six seven eight"
    script.replies[:] = [reply]
    sent = ""
    try:
        with pytest.raises(openai.APIError, match="ran past its budget"):
            for chunk in _client(server, "over").chat.completions.create(model="m", messages=ASK, max_tokens=64,
                                                                        stream=True):
                sent += (chunk.choices[0].delta.content or "") if chunk.choices else ""
    finally:
        server.stop()
    recorded = tokenizer.decode(tokenizer(reply, add_special_tokens=False)["input_ids"][:4])
    assert sent and recorded.startswith(sent) and len(sent) < len(reply)  # the witness: some content went out
