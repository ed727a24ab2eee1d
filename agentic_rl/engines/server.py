"""`agentic-rl serve CHECKPOINT`: an OpenAI-compatible server over the embedded engine, speaking
token ids.

Endpoints (the token-id extensions are named as vLLM names them, so one client reads both):

- `POST /v1/completions`: `prompt` a string or a list of token ids; `max_tokens`, `temperature`,
  `top_p`, `stop` (strings; `include_stop_str_in_output` is always on: the ids are what was sampled),
  `seed` (an integer: the request samples from a generator of its own, whatever batch it lands in),
  `logprobs` (any value: the sampled tokens' logprobs under the tempered distribution),
  `return_token_ids` (each choice then carries `prompt_token_ids` and `token_ids`),
  `prompt_logprobs` (each prompt token's logprob at temperature 1, `None` for the first, as
  `{str(id): {"logprob": x}}`). `finish_reason` is `stop` or `length`; `stop_reason` is the stop
  string matched, or None for the end-of-sequence token.
- A refused request answers OpenAI's error body, `{"error": {"message", "type", "param", "code"}}`.
- Every completion answers `usage`: `prompt_tokens`, `completion_tokens`, `total_tokens`. A request
  whose prompt plus `max_tokens` (16 when it names none) passes the model's context
  (`max_position_embeddings`) gets a 400 naming the limit, as vLLM refuses one (its `max_model_len`)
  and OpenAI does: the positions past it were never trained, so what they sample is noise.
- `POST /v1/chat/completions`: `messages`, optional `tools` (OpenAI function schemas), in the
  checkpoint's tool-call format: the registered format whose chat template the checkpoint carries
  (a run saves its format's, `trainer.loop.speak_the_format`; `formats.format_of_template`), else the
  model's own template with hermes calls. Assistant `tool_calls` and `tool` results are rendered by
  that template (after the tokenizer's BOS where it opens with one, as the rollout prompts); a reply
  stops at the format's stop strings too, and its calls, in the family's syntax (`<tool_call>` JSON,
  Llama's JSON, Mistral's `[TOOL_CALLS]`, Gemma's `tool_code`), come back as OpenAI `tool_calls`.
  With `return_token_ids`, the choice carries the prompt's and the reply's token ids. The OpenAI
  options (`stream`, `tool_choice`, `n`, `logprobs`, `stop`, `seed`, ...) are read and refused in
  `openai_request.py`, streamed in `sse.py`; docs/proxy.md, "The API surface", lists every field.
- `POST /v1/responses`: the Responses API as a chat completion (`responses.py`).
- `POST /v1/load_weights` `{"path": DIR}`: load a checkpoint's weights (safetensors) into the
  served model and sync the sampler; answers the new `version`. Requests in flight finish on the
  old weights; none samples from half-loaded ones.
- `GET /health`, `GET /v1/models`, `GET /version`; `GET /weights/checksum` (`version`, `dtype`, and
  the crc32 of the weights the sampler holds, `probe.weights_checksum`: the weight-sync probe
  compares it with the trainer's).
- Recording mode (`--record`; `rollout.agent` in training): `/episodes/{id}/v1/chat/completions`
  and `/episodes/{id}/v1/responses` record every call of an episode as token ids,
  `POST /episodes/{id}/reward`, `GET /episodes/{id}` gives its exact training rows, `DELETE /episodes/{id}` forgets it (`engines/recorder.py`,
  docs/proxy.md).

Concurrent requests are batched: a worker thread takes every request waiting, groups them by
sampling parameters and decodes each group in one engine session (the embedded engine's batching
and shared-prefix prefill), while new requests queue for the next batch (`engines/batching.py`). A
handler awaits its request's future on the event loop, holding no thread, so any number wait at
once; a streamed one is told each token as it is sampled and sends the content as it comes
(`sse.py`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
import uuid
import zlib
from collections.abc import Callable
from dataclasses import dataclass

from jinja2 import TemplateError

from agentic_rl.engines.base import Sample, SamplingParams
from agentic_rl.engines.batching import BatchingWorker
from agentic_rl.engines.openai_request import (
    BadRequest,
    ChatOptions,
    chat_options,
    text_messages,
    tool_opening,
)
from agentic_rl.engines.sse import ContentStream, chat_live
from agentic_rl.envs.formats import ToolFormat, bos_text, format_of_template


@dataclass(frozen=True, kw_only=True)
class _Pending:
    """A chat completion checked and ready to sample: its prompt (the forced opening last), sampling,
    the weights' version it is asked at, and each choice's seed."""

    ids: list[int]
    forced: list[int]
    params: SamplingParams
    version: int
    seeds: list[int | None]


def _stop_reason(sample: Sample, params: SamplingParams, tokenizer) -> tuple[str, str | None]:
    """(finish_reason, stop_reason) as vLLM reports them."""
    if sample.stop_reason == "length":
        return "length", None
    if sample.stop_reason == "stop":
        tail = tokenizer.decode(list(sample.ids[-12:]), skip_special_tokens=False)
        return "stop", next((s for s in params.stop_strings if s in tail), None)
    return "stop", None


def render_chat(fmt: ToolFormat, tokenizer, messages: list[dict], tools: list | None) -> str:
    """A chat's prompt text as `fmt` renders it (its chat template), after the BOS it opens with."""
    return bos_text(fmt, tokenizer) + fmt.render_prompt(messages, tools or ())


def reply_message(fmt: ToolFormat, tokenizer, ids: list[int], eos_ids, stop=(), calls: bool = True) -> dict:
    """The sampled reply as an OpenAI assistant message: `fmt`'s parser reads the calls (special
    tokens kept: Mistral's `[TOOL_CALLS]` and Llama's `<|python_tag|>` are tokens of their vocabularies),
    each call gets an id of its own, and the end of turn is not content. The text ends before the
    first of the request's `stop` strings, as OpenAI cuts it (the ids keep what was sampled);
    `calls` False (`tool_choice: none`): the whole reply is content, no call is read."""
    ids = ids[:-1] if ids and ids[-1] in eos_ids else ids
    text = tokenizer.decode(ids, skip_special_tokens=False)
    text = text[: min([text.index(s) for s in stop if s in text], default=len(text))]
    if not calls:
        return {"role": "assistant", "content": text.removesuffix(fmt.end_of_turn) or None}
    message = fmt.action_message(text)
    for call in message.get("tool_calls", ()):
        call["id"] = f"call_{uuid.uuid4().hex[:12]}"
    return {**message, "content": message["content"] or None}


class _Handlers:
    """The endpoints' bodies over one engine (FastAPI calls the bound methods)."""

    def __init__(self, engine, tokenizer, name: str, recorder=None, sampling: SamplingParams | None = None,
                 fmt: ToolFormat | None = None):
        self.engine, self.tokenizer, self.name = engine, tokenizer, name
        self.fmt = fmt or format_of_template(tokenizer.chat_template)
        self.worker = BatchingWorker(engine)
        self.recorder, self.sampling = recorder, sampling
        config = getattr(getattr(engine, "model", None), "config", None)  # a scripted engine has no model
        self.context = getattr(config, "max_position_embeddings", None)  # None: no limit known

    def params(self, body: dict) -> SamplingParams:
        from fastapi import HTTPException

        if self.sampling is not None:  # training: the recipe's sampling, whatever the agent asks
            return self.sampling
        stop = body.get("stop") or ()
        try:
            return SamplingParams(float(body.get("temperature", 1.0)), float(body.get("top_p", 1.0)),
                                  int(body.get("max_tokens") or 16), tuple([stop] if isinstance(stop, str) else stop))
        except (TypeError, ValueError) as e:
            raise HTTPException(400, f"invalid sampling parameters: {e}") from None

    async def sample(self, prompt: list[int], params: SamplingParams, seed: int | None = None,
                     on_token: Callable[[int], None] | None = None) -> Sample:
        """The engine's sample of `prompt`, awaited on the event loop (no thread is held while it waits,
        so any number of requests wait at once); `on_token`: each token as it is sampled, on the
        batching worker's thread."""
        self.check(prompt, params)
        return await asyncio.wrap_future(self.worker.submit(prompt, params, seed, on_token))

    def check(self, prompt: list[int], params: SamplingParams) -> None:
        from fastapi import HTTPException

        if not prompt or not all(isinstance(t, int) and 0 <= t < len(self.tokenizer) for t in prompt):
            raise HTTPException(400, "prompt: token ids of this model's vocabulary, at least one")
        if self.context is not None and len(prompt) + params.max_new_tokens > self.context:
            raise HTTPException(400, f"This model's maximum context length is {self.context} tokens; the request "
                                     f"has {len(prompt)} prompt tokens and asks for up to {params.max_new_tokens} "
                                     f"more ({len(prompt)} + {params.max_new_tokens} > {self.context}): shorten "
                                     "the prompt or lower max_tokens")

    def reply(self, kind: str, choices: list[dict], prompt: list[int], samples: list[Sample]) -> dict:
        generated = sum(len(s.ids) for s in samples)
        return {"id": f"{kind}-{uuid.uuid4().hex}", "object": "chat.completion" if kind == "chatcmpl" else
                "text_completion", "created": int(time.time()), "model": self.name, "choices": choices,
                "weight_version": self.engine.version,
                "usage": {"prompt_tokens": len(prompt), "completion_tokens": generated,
                          "total_tokens": len(prompt) + generated}}

    async def health(self):
        return {"status": "ok", "version": self.engine.version, "dtype": str(self.engine.dtype).removeprefix("torch.")}

    async def version(self):
        return {"version": self.engine.version}

    async def checksum(self):
        from fastapi.concurrency import run_in_threadpool

        def read() -> dict:
            with self.worker.lock:  # not while weights load
                return {"version": self.engine.version, "dtype": str(self.engine.dtype).removeprefix("torch."),
                        "checksum": self.engine.weights_checksum()}
        return await run_in_threadpool(read)

    async def models(self):
        return {"object": "list", "data": [{"id": self.name, "object": "model"}]}

    async def completions(self, body: dict):
        from fastapi import HTTPException
        from fastapi.concurrency import run_in_threadpool

        tok, prompt = self.tokenizer, body.get("prompt")
        ids = list(tok(prompt, add_special_tokens=False)["input_ids"]) if isinstance(prompt, str) else prompt
        if not isinstance(ids, list):
            raise HTTPException(400, "prompt: a string or a list of token ids")
        params, seed = self.params(body), body.get("seed")
        if seed is not None and (not isinstance(seed, int) or isinstance(seed, bool) or seed < 0):
            raise HTTPException(400, "seed: a non-negative integer")
        s = await self.sample(ids, params, seed)
        finish, stop = _stop_reason(s, params, tok)
        choice = {"index": 0, "text": s.text, "finish_reason": finish, "stop_reason": stop,
                  "logprobs": {"tokens": [tok.decode([t]) for t in s.ids], "token_logprobs": list(s.logprobs)}
                  if body.get("logprobs") is not None else None}
        if body.get("return_token_ids"):
            choice.update(prompt_token_ids=ids, token_ids=list(s.ids))
        if body.get("prompt_logprobs") is not None:
            lps = await run_in_threadpool(lambda: self.engine.score(ids).tolist())
            choice["prompt_logprobs"] = [None] + [{str(t): {"logprob": lp}} for t, lp in zip(ids[1:], lps)]
        return self.reply("cmpl", [choice], ids, [s])

    def render(self, messages: list[dict], tools: list | None) -> str:
        return render_chat(self.fmt, self.tokenizer, messages, tools)

    def prompt(self, body: dict, episode: str | None) -> list[int]:
        """The ids of a chat's prompt; recorded (`episode`), the episode's own replies spliced in as
        sampled (`engines/recorder.py`)."""
        messages, tools = body.get("messages"), body.get("tools")
        if not isinstance(messages, list) or not messages or not all(isinstance(m, dict) for m in messages):
            raise BadRequest("messages", "a non-empty list of message objects")
        if tools is not None and not isinstance(tools, list):
            raise BadRequest("tools", "a list of function tools")
        for i, t in enumerate(tools or ()):
            if not (isinstance(t, dict) and t.get("type", "function") == "function" and isinstance(t.get("function"), dict)
                    and isinstance(t["function"].get("name"), str)):
                raise BadRequest(f"tools[{i}]", 'a function tool: {"type": "function", "function": {"name": ...}}')
        messages = text_messages(messages)
        try:
            if episode is not None:
                return self.recorder.prompt_ids(episode, messages, tools, self.render)
            return self._encode(self.render(messages, tools))
        except (TypeError, KeyError, ValueError, AttributeError, TemplateError) as e:
            raise BadRequest("messages", f"the chat template cannot render them ({type(e).__name__}: {e})") from None

    def _encode(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"]) if text else []

    def chat_params(self, body: dict, opts: ChatOptions, prompt: int) -> SamplingParams:
        """Training (`sampling`): the recipe's, plus the request's stop strings (a stop ends a sample
        and changes nothing of its distribution); else the request's, and the format's stop strings
        (a reply ends where the format's actions end: a call's closing tag, its end of turn). A chat
        that names no max_tokens may fill the context the `prompt` tokens leave (vLLM's default)."""
        room = self.context - prompt if self.context is not None and self.context > prompt else None
        params = self.sampling or self.params({**body, "max_tokens": opts.max_tokens or room})
        extra = () if self.sampling else self.fmt.stop_strings
        return dataclasses.replace(params, stop_strings=tuple(dict.fromkeys((*params.stop_strings, *opts.stop,
                                                                             *extra))))

    def _seeds(self, opts: ChatOptions, episode: str | None) -> list[int | None]:
        """Recorded: a stream of its own per episode and call (and the request's seed), so a run samples
        alike however its calls batch; else the request's seed, one more for each further choice."""
        if episode is not None:
            key = f"{episode}/{len(self.recorder.episode(episode).calls)}"
            return [zlib.crc32((key if opts.seed is None else f"{key}/{opts.seed}").encode())]
        return [None if opts.seed is None else opts.seed + i for i in range(opts.n)]

    def options(self, body: dict, episode: str | None) -> ChatOptions:
        one_call = not getattr(self.fmt, "call_end", "")  # calls end at a stop string: one a reply
        return chat_options(body, recording=episode is not None, one_call_a_reply=one_call)

    async def chat(self, body: dict, episode: str | None = None):
        """A chat completion; with `episode` (recording mode) the call is recorded under it. Streamed,
        its content goes out as it is sampled (`sse.chat_live`)."""
        opts = self.options(body, episode)
        if opts.stream:
            from fastapi.responses import StreamingResponse

            head = {"id": f"chatcmpl-{uuid.uuid4().hex}", "created": int(time.time()), "model": self.name}
            streams, tokens, done = self.live(body, opts, episode)
            return StreamingResponse(chat_live(head, streams, tokens, done, opts.include_usage),
                                     media_type="text/event-stream")
        return await self.complete(body, opts, episode)

    async def complete(self, body: dict, opts: ChatOptions, episode: str | None = None) -> dict:
        """The chat completion's body: `opts.n` samples of the prompt (one when recorded, recorded)."""
        return await self._sampled(self._prepare(body, opts, episode), body, opts, episode)

    def live(self, body: dict, opts: ChatOptions, episode: str | None):
        """A streamed completion started: (each choice's `ContentStream`, the queue of (choice, token)
        as they are sampled, the task of the finished body). The request is checked first, so a refusal
        is still a 400; the task records the call even if the client leaves."""
        pending = self._prepare(body, opts, episode)
        loop, tokens = asyncio.get_running_loop(), asyncio.Queue()

        def hear(i: int) -> Callable[[int], None]:
            return lambda token: loop.call_soon_threadsafe(tokens.put_nowait, (i, token))
        openers = () if opts.tool_choice.mode == "none" else getattr(self.fmt, "call_openers", None)
        holds = (*pending.params.stop_strings, *opts.stop, self.fmt.end_of_turn, *(openers or ()))
        room = 0 if openers is None else self.recorder.room(episode) if episode is not None else None
        streams = {i: ContentStream(self.tokenizer, holds, self.engine.eos_ids, pending.forced, room)
                   for i in range(len(pending.seeds))}
        done = asyncio.ensure_future(self._sampled(pending, body, opts, episode, hear))
        done.add_done_callback(lambda t: t.cancelled() or t.exception())  # a client gone: its refusal is not lost noise
        return streams, tokens, done

    def _prepare(self, body: dict, opts: ChatOptions, episode: str | None) -> _Pending:
        """The request's prompt and sampling, checked (a 400 names what is refused). A `tool_choice`
        that forces a call feeds the call's opening after the prompt (prompt tokens, never trained;
        `openai_request.tool_opening`) and the model writes the rest."""
        forced = self._encode(tool_opening(self.fmt, opts.tool_choice))
        ids = [*self.prompt(body, episode), *forced]
        params = self.chat_params(body, opts, len(ids))
        self.check(ids, params)
        return _Pending(ids=ids, forced=forced, params=params, version=self.engine.version,
                        seeds=self._seeds(opts, episode))

    async def _sampled(self, p: _Pending, body: dict, opts: ChatOptions, episode: str | None,
                       hear: Callable[[int], Callable[[int], None]] | None = None) -> dict:
        """`p` sampled (`hear(choice)`: told each token), recorded under `episode`, as the body."""
        samples = await asyncio.gather(*(self.sample(p.ids, p.params, seed, hear and hear(i))
                                         for i, seed in enumerate(p.seeds)))
        choices = [self._choice(i, s, p.params, opts, p.forced) for i, s in enumerate(samples)]
        if body.get("return_token_ids"):
            for c, s in zip(choices, samples):
                c.update(prompt_token_ids=p.ids, token_ids=list(s.ids), token_logprobs=list(s.logprobs))
        if episode is not None:
            from agentic_rl.engines.recorder import Call

            (s,) = samples
            self.recorder.record(episode, Call(tuple(p.ids), tuple(s.ids), tuple(s.logprobs), s.text, s.stop_reason,
                                               choices[0]["message"], p.version, forced=tuple(p.forced)))
        return self.reply("chatcmpl", choices, p.ids, samples)

    def _choice(self, index: int, s: Sample, params: SamplingParams, opts: ChatOptions, forced: list[int]) -> dict:
        tok = self.tokenizer
        message = reply_message(self.fmt, tok, [*forced, *s.ids], self.engine.eos_ids, opts.stop,
                                opts.tool_choice.mode != "none")
        finish = "tool_calls" if message.get("tool_calls") else _stop_reason(s, params, tok)[0]
        logprobs = {"content": [{"token": (t := tok.decode([i])), "logprob": lp, "bytes": list(t.encode()),
                                 "top_logprobs": []} for i, lp in zip(s.ids, s.logprobs)]} if opts.logprobs else None
        return {"index": index, "message": message, "logprobs": logprobs, "finish_reason": finish}

    async def responses(self, body: dict, episode: str | None = None):
        """The Responses API (`engines/responses.py`): its items as a chat, the reply as output items;
        streamed, its text goes out as it is sampled (`responses.live_events`)."""
        from agentic_rl.engines import responses

        chat = responses.to_chat(body)
        opts = self.options(chat, episode)
        if body.get("stream"):
            from fastapi.responses import StreamingResponse

            head = responses.response_head(body, self.name)
            streams, tokens, done = self.live(chat, opts, episode)  # one choice: a response has one reply
            return StreamingResponse(responses.live_events(head, body, streams[0], tokens, done),
                                     media_type="text/event-stream")
        return responses.from_chat(await self.complete(chat, opts, episode), body)

    async def episode_responses(self, episode: str, body: dict):
        return await self.responses(body, episode)

    async def episode_chat(self, episode: str, body: dict):
        return await self.chat(body, episode)

    async def episode_reward(self, episode: str, body: dict):
        """The episode's reward, posted by the agent or a verifier when it ends."""
        from fastapi import HTTPException

        try:
            self.recorder.set_reward(episode, float(body["reward"]))
        except (KeyError, TypeError, ValueError):
            raise HTTPException(400, "reward: a number") from None
        return {"episode": episode, "reward": float(body["reward"])}

    async def episode_rows(self, episode: str):
        """The episode's recorded calls as training rows, one per context: token ids, loss mask (1 on
        sampled tokens), the sampler's logprobs, and whether the calls extended each other (one row)."""
        from agentic_rl.engines.recorder import Episode, trajectory
        from agentic_rl.types import Task

        ep = self.recorder.episodes.get(episode, Episode(episode))  # asking does not open an episode
        whole = trajectory(ep, Task(episode, ""))
        rows = whole.contexts() if whole is not None else []
        return {"episode": episode, "reward": ep.reward, "calls": len(ep.calls), "merged": len(rows) <= 1,
                "rows": [{"token_ids": t.token_ids(), "loss_mask": t.loss_mask(),
                          "logprobs": t.sampled_logprobs()} for t in rows]}

    async def episode_drop(self, episode: str):
        """Forget the episode (a long-running recorder keeps every episode until asked)."""
        ep = self.recorder.pop(episode)
        return {"episode": episode, "calls": len(ep.calls)}

    async def load_weights(self, body: dict):
        from fastapi import HTTPException
        from fastapi.concurrency import run_in_threadpool

        try:
            version = await run_in_threadpool(self.worker.load_weights, str(body.get("path", "")))
        except (FileNotFoundError, ValueError, RuntimeError) as e:
            raise HTTPException(400, str(e)) from None
        return {"version": version}


async def _openai_error(request, e):
    """A refusal in OpenAI's error body (as vLLM answers one), whose message the `openai` client shows."""
    from fastapi.responses import JSONResponse

    kind = "invalid_request_error" if e.status_code < 500 else "server_error"
    return JSONResponse({"error": {"message": str(e.detail), "type": kind, "param": None, "code": e.status_code}},
                        status_code=e.status_code, headers=getattr(e, "headers", None))


async def _bad_request(request, e):
    """A request refused for one field (`openai_request.BadRequest`; FastAPI's own body check)."""
    from fastapi.responses import JSONResponse

    param = getattr(e, "param", None)
    message = str(e) if param else "the request body: a JSON object"
    return JSONResponse({"error": {"message": message, "type": "invalid_request_error", "param": param,
                                   "code": None}}, status_code=400)


def create_app(engine, tokenizer, name: str = "agentic-rl", recorder=None, sampling: SamplingParams | None = None,
               fmt: ToolFormat | None = None):
    """The ASGI app (FastAPI) serving `engine`. With a `recorder` (`engines/recorder.py`) it also
    records: `/episodes/{id}/v1/chat/completions`, `POST /episodes/{id}/reward`, `GET /episodes/{id}`;
    `sampling` then replaces every request's sampling parameters (the recipe's, for training). `fmt`:
    the tool-call format chats are rendered and parsed in (default: the one the tokenizer's chat
    template speaks, `formats.format_of_template`)."""
    from fastapi import FastAPI
    from fastapi.exceptions import RequestValidationError
    from starlette.exceptions import HTTPException as StarletteHTTPException

    app = FastAPI(title="agentic-rl serve")
    app.exception_handler(StarletteHTTPException)(_openai_error)
    app.exception_handler(BadRequest)(_bad_request)
    app.exception_handler(RequestValidationError)(_bad_request)
    h = _Handlers(engine, tokenizer, name, recorder, sampling, fmt)
    app.state.worker = h.worker
    app.get("/health")(h.health)
    app.get("/version")(h.version)
    app.get("/v1/models")(h.models)
    app.get("/weights/checksum")(h.checksum)
    app.post("/v1/completions")(h.completions)
    app.post("/v1/chat/completions")(h.chat)
    app.post("/v1/responses")(h.responses)
    app.post("/v1/load_weights")(h.load_weights)
    if recorder is not None:
        app.post("/episodes/{episode}/v1/chat/completions")(h.episode_chat)
        app.post("/episodes/{episode}/v1/responses")(h.episode_responses)
        app.post("/episodes/{episode}/reward")(h.episode_reward)
        app.get("/episodes/{episode}")(h.episode_rows)
        app.delete("/episodes/{episode}")(h.episode_drop)
    return app


def serve(checkpoint: str, host: str = "127.0.0.1", port: int = 8000, precision: str = "auto",
          device: str = "auto", record: bool = False, history: str = "keep") -> None:
    """Load `checkpoint` and serve it until interrupted (`record`: the recording proxy's endpoints too)."""
    import uvicorn

    from agentic_rl.engines.hf import HFEngine
    from agentic_rl.engines.recorder import Recorder
    from agentic_rl.models.loader import load_model

    model, tokenizer = load_model(checkpoint, device=device)
    engine = HFEngine(model, tokenizer, precision)
    fmt = format_of_template(tokenizer.chat_template)
    recorder = Recorder(tokenizer, engine.eos_ids, history, end_of_turn=fmt.end_of_turn) if record else None
    uvicorn.run(create_app(engine, tokenizer, name=checkpoint, recorder=recorder), host=host, port=port,
                log_level="warning")
