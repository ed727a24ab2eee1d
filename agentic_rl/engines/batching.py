"""The server's batching worker (`engines/server.py`): one thread takes every request waiting, groups
them by sampling parameters and decodes each group in one engine session (the embedded engine's
batching and shared-prefix prefill), while new requests queue for the next batch. A streamed
request's batch is told each token as it is sampled (`on_token`); the others decode as ever.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path

from agentic_rl.engines.base import Sample, SamplingParams
from agentic_rl.errors import UserDataError, UserFileError


@dataclass
class _Request:
    prompt: list[int]
    params: SamplingParams
    seed: int | None = None  # its own random stream: the same draws whatever batch it lands in
    on_token: Callable[[int], None] | None = None  # hears each token as it is sampled (a streamed reply)
    future: Future = field(default_factory=Future)


class BatchingWorker:
    """Decodes queued requests in batches on one thread; `load_weights` waits for the batch in flight."""

    def __init__(self, engine, max_batch: int = 64):
        self.engine, self.max_batch = engine, max_batch
        self.queue: queue.Queue[_Request] = queue.Queue()
        self.lock = threading.Lock()  # held while decoding and while loading weights
        self._seed = 0
        threading.Thread(target=self._loop, name="agentic-rl-serve", daemon=True).start()

    def submit(self, prompt: list[int], params: SamplingParams, seed: int | None = None,
               on_token: Callable[[int], None] | None = None) -> Future:
        """The request's sample, as a future; `on_token(id)`: each of its tokens as it is sampled."""
        request = _Request(prompt, params, seed, on_token)
        self.queue.put(request)
        return request.future

    def _loop(self) -> None:
        while True:
            batch = [self.queue.get()]
            while len(batch) < self.max_batch:
                try:
                    batch.append(self.queue.get_nowait())
                except queue.Empty:
                    break
            groups: dict[tuple, list[_Request]] = {}
            for r in batch:
                groups.setdefault((r.params, r.seed is None), []).append(r)
            with self.lock:
                for (params, _), requests in groups.items():
                    self._decode(params, requests)

    def _decode(self, params: SamplingParams, requests: list[_Request]) -> None:
        self._seed += 1
        out: dict[int, Sample] = {}
        seeds = {i: r.seed for i, r in enumerate(requests)} if requests[0].seed is not None else None
        heard = {i: r.on_token for i, r in enumerate(requests) if r.on_token is not None}
        # only a streamed request's batch is told its tokens: the others decode as they always did
        hear = {"on_token": lambda row, token: heard[row](token) if row in heard else None} if heard else {}
        try:
            self.engine.session(self._seed, seeds).run({i: r.prompt for i, r in enumerate(requests)}, params,
                                                       lambda row, s: out.__setitem__(row, s), **hear)
        except Exception as e:  # the requests fail, the server lives
            for r in requests:
                r.future.set_exception(e)
            return
        for i, r in enumerate(requests):
            r.future.set_result(out[i])

    def load_weights(self, path: str) -> int:
        from safetensors.torch import load_file

        files = sorted(Path(path).glob("*.safetensors"))
        if not files:
            raise UserFileError(f"no *.safetensors in {path}")
        state = {k: v for f in files for k, v in load_file(f).items()}
        with self.lock:
            missing, unexpected = self.engine.model.load_state_dict(state, strict=False)
            if unexpected or [k for k in missing if not k.endswith("lm_head.weight")]:  # a tied head is not saved
                raise UserDataError(f"weights of another model: missing {missing[:3]}, unexpected {unexpected[:3]}")
            return self.engine.sync_weights()
