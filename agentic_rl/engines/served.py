"""The served engine: the policy's sampler behind an OpenAI-compatible HTTP server (`agentic-rl
serve`, or vLLM), spoken to in token ids.

Each action is one `/v1/completions` request whose prompt is the episode's whole token prefix so
far (the prompt, every action, every observation: the server's prefix cache does the reuse), with
`return_token_ids` and `logprobs`: the trajectory keeps exactly the ids the server sampled and
their logprobs, never text we re-tokenize. Actions stop on the protocol's end-of-call text as the
embedded engine's do (`stop` with the stop string kept in the output). Every episode of a rollout
is a task on one event loop, so up to `max_in_flight` requests are in flight at once.

A request that fails — the server down, a timeout, an error status, a malformed answer — is retried
once; then the episode ends as an infrastructure failure (`faults.py` kind `engine`), and the rest
of the rollout goes on.

Random streams: with `row_seeds` (rollout.rng: episode) every request carries a `seed` of its own,
drawn from its row's seed and the action's place in the episode, so an episode samples the same
tokens whichever rows share its batch (both our server and vLLM honour a request's `seed`); without
them the server samples with its own generator.

Weights: `sync_weights()` hands the trainer's policy to the writer `rollout.engine.weight_update` names
(`weight_update.py`: our `/v1/load_weights`, vLLM's in-place reload, or vLLM's runtime LoRA
loading); the weight-sync probe (`probe.py`) then checks what the server samples from. `version` is
the trainer's count of its syncs (a resumed run's continues from its state), never the server's: a
server started afresh, or one that served other runs, counts differently.
"""

from __future__ import annotations

import asyncio
import queue
import tempfile
import threading
import zlib
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import torch

from agentic_rl.engines.base import Restart, Sample, SamplingParams
from agentic_rl.engines.hf import eos_ids
from agentic_rl.engines.weight_update import writer
from agentic_rl.faults import InfrastructureError


class EngineError(InfrastructureError):
    """The served engine could not answer a request (after its retry)."""

    kind = "engine"


class ServedEngine:
    max_in_flight = 64  # requests at once (an instance may set its own before its first session)

    def __init__(self, url: str, tokenizer, model=None, timeout_s: float = 120.0, weights_dir: str | None = None,
                 weight_update: str = "auto", version: int = 0, dtype: torch.dtype | None = None):
        self.url = url.rstrip("/")
        self.tokenizer, self.model = tokenizer, model  # the trainer's policy, whose weights `sync_weights` sends
        self.eos_ids = eos_ids(tokenizer, model)  # what ends a reply (the recording proxy's replies, over this engine)
        self.timeout_s = timeout_s
        self.weights_dir = Path(weights_dir or tempfile.mkdtemp(prefix="agentic-rl-weights-"))
        self.down: Callable[[], str] | None = None  # a managed server's account of why it failed (its exit, its log)
        health = self._get("/health")  # ours says its version and dtype; vLLM's answers an empty 200
        self.version = version  # the trainer's: the weights' version the server samples from
        # what the server computes in (the probe's tolerance follows it): what it says, else what the
        # run started it with (`dtype`, a managed vLLM), else bf16
        said = getattr(torch, str(health.get("dtype", "")), None)
        self.dtype = said if isinstance(said, torch.dtype) else dtype or torch.bfloat16
        self.writer = writer(weight_update, health)
        self.served_model: str | None = None  # the `model` requests name (a LoRA adapter); None = the server's
        # data-parallel ranks share the server: the owner (rank 0) writes the weights, every rank waits for it
        # (`managed.served_engine` sets both on the other ranks' engines)
        self.owner, self.world = True, None

    # ------------------------------------------------------------------ weights
    def sync_weights(self) -> int:
        """The trainer's current weights to the server: the next version. Under data parallelism only
        the owner sends them; every rank waits until it has (and learns the model requests name)."""
        if self.owner:
            self.send_weights()
        if self.world is not None and self.world.size > 1:
            self.served_model = self.world.gather(self.served_model)[0]
        self.version += 1
        return self.version

    def send_weights(self) -> None:
        """The trainer's weights to the server, keeping the version: the weights the version already
        names (a server just started, or a resumed run's restored weights)."""
        self.writer(self)

    def session(self, seed: int = 0, row_seeds: Mapping[int, int] | None = None) -> ServedSession:
        return ServedSession(self, seed, row_seeds)

    # ------------------------------------------------------------------ http
    def _get(self, path: str) -> dict:
        import httpx

        try:
            r = httpx.get(self.url + path, timeout=self.timeout_s)
            r.raise_for_status()
            if "json" not in r.headers.get("content-type", ""):
                return {"text": r.text}  # vLLM answers some admin endpoints in plain text
            return r.json()
        except (httpx.HTTPError, ValueError) as e:
            raise EngineError(f"the served engine at {self.url} did not answer {path}: {e}{self.why()}") from None

    def _post(self, path: str, body: dict) -> dict:
        import httpx

        try:
            r = httpx.post(self.url + path, json=body, timeout=self.timeout_s)
            r.raise_for_status()
            if "json" not in r.headers.get("content-type", ""):
                return {"text": r.text}  # vLLM answers some admin endpoints in plain text
            return r.json()
        except (httpx.HTTPError, ValueError) as e:
            raise EngineError(f"the served engine at {self.url} failed {path}: {e}{self.why()}") from None

    def why(self) -> str:
        """What a managed server says of a failed request ("" for a server the user runs)."""
        return f"; {self.down()}" if self.down is not None else ""


OnStop = Callable[[int, Sample], Sequence[int] | None]
OnError = Callable[[int, str], None]


class ServedSession:
    """The rows' requests run concurrently on an event loop of their own thread; this thread takes
    each finished action in turn and calls `on_stop` (the env steps here, on the caller's thread,
    where its deadline and its own event loop work), then sends the row's next request."""

    def __init__(self, engine: ServedEngine, seed: int, row_seeds: Mapping[int, int] | None = None):
        self.engine = engine  # without row seeds the server samples with its own generator: `seed` cannot reach it
        self.row_seeds = row_seeds
        self.actions: dict[int, int] = {}  # requests sent per row

    def run(self, prompts: Mapping[int, Sequence[int]], params: SamplingParams, on_stop: OnStop,
            max_new: Callable[[int], int] | None = None, on_error: OnError | None = None,
            on_token: Callable[[int, int], None] | None = None) -> None:
        """Every row's episode to its end. A row whose request fails twice ends there:
        `on_error(row, why)` (without it, the error is raised). `on_token` hears nothing: a reply
        comes back whole, and `on_stop` has all its tokens."""
        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=loop.run_forever, name="agentic-rl-served", daemon=True)
        thread.start()
        client = asyncio.run_coroutine_threadsafe(self._client(), loop).result()
        done: queue.Queue = queue.Queue()
        errors: dict[int, str] = {}
        out = [0]  # requests sent and not yet taken back

        def send(row: int, ids: list[int]) -> None:
            limit = min(params.max_new_tokens, max_new(row)) if max_new else params.max_new_tokens
            body = {"prompt": ids, "max_tokens": max(limit, 1), "temperature": params.temperature,
                    "top_p": params.top_p, "stop": list(params.stop_strings), "include_stop_str_in_output": True,
                    "logprobs": 0, "return_token_ids": True, "skip_special_tokens": False}
            if self.engine.served_model:
                body["model"] = self.engine.served_model
            if self.row_seeds is not None:
                body["seed"] = request_seed(self.row_seeds[row], self.actions.get(row, 0))
            self.actions[row] = self.actions.get(row, 0) + 1
            future = asyncio.run_coroutine_threadsafe(self._complete(client, body), loop)
            future.add_done_callback(lambda f: done.put((row, ids, f)))
            out[0] += 1

        try:
            for row, ids in prompts.items():
                send(row, list(ids))
            while out[0]:
                row, ids, future = done.get()
                out[0] -= 1
                result = future.result()
                if isinstance(result, str):
                    errors[row] = result
                    continue
                nxt = on_stop(row, result)
                if nxt is not None:
                    send(row, list(nxt) if isinstance(nxt, Restart) else [*ids, *result.ids, *nxt])
        finally:
            asyncio.run_coroutine_threadsafe(client.aclose(), loop).result()
            loop.call_soon_threadsafe(loop.stop)
            thread.join()
            loop.close()
        for row, why in errors.items():
            if on_error is None:
                raise EngineError(why)
            on_error(row, why)

    def generate(self, prompts: Mapping[int, Sequence[int]], params: SamplingParams) -> dict[int, Sample]:
        out: dict[int, Sample] = {}
        self.run(prompts, params, lambda row, sample: out.__setitem__(row, sample))
        return out

    async def _client(self):
        import httpx

        self._gate = asyncio.Semaphore(self.engine.max_in_flight)
        return httpx.AsyncClient(base_url=self.engine.url, timeout=self.engine.timeout_s,
                                 limits=httpx.Limits(max_connections=self.engine.max_in_flight))

    async def _complete(self, client, body: dict) -> Sample | str:
        """One action: the Sample, or why it could not be had (after one retry)."""
        import httpx

        why = ""
        async with self._gate:
            for _ in range(2):
                try:
                    r = await client.post("/v1/completions", json=body)
                    r.raise_for_status()
                    return _sample(r.json())
                except (httpx.HTTPError, ValueError, KeyError, TypeError, IndexError) as e:
                    why = f"the served engine at {self.engine.url} failed a completion: {type(e).__name__}: {e}"
        return why + self.engine.why()


def request_seed(row_seed: int, action: int) -> int:
    """The `seed` of a row's `action`-th request (0-based): 31 bits, which every server takes."""
    return zlib.crc32(f"{row_seed}/{action}".encode()) & 0x7FFFFFFF


def _sample(reply: dict) -> Sample:
    """A completion's choice -> Sample; raises on a malformed answer."""
    choice = reply["choices"][0]
    ids, lps = choice["token_ids"], choice["logprobs"]["token_logprobs"]
    if not isinstance(ids, list) or len(ids) != len(lps) or not all(isinstance(t, int) for t in ids):
        raise ValueError("token_ids and token_logprobs of different lengths, or ids that are not integers")
    finish = choice.get("finish_reason")
    reason = "length" if finish == "length" else "stop" if choice.get("stop_reason") is not None else "eos"
    return Sample(tuple(ids), tuple(float(x) for x in lps), choice.get("text", ""), reason)
