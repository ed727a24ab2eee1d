"""The served engine (`engines/served.py`) against our own server (`engines/server.py`, a real
uvicorn on a local port) on the tiny model: tokens in, tokens out, through HTTP.

The token contract: what comes back is the ids the server sampled and their logprobs, which a
fresh forward of the trainer's model reproduces (fp32 on both sides: equal within 1e-5). Error
paths: a server that is down is a clear error at start; a request that times out or gets a
malformed answer ends its episode as an infrastructure failure, and the rest of the rollout runs.
"""

from __future__ import annotations

import copy
import socket
import threading
import time
from pathlib import Path

import httpx
import pytest
import torch

from agentic_rl.engines.base import SamplingParams
from agentic_rl.engines.hf import HFEngine
from agentic_rl.engines.served import EngineError, ServedEngine
from agentic_rl.engines.server import create_app


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """A real uvicorn serving `app` on a free local port, in a thread."""

    def __init__(self, app):
        import uvicorn

        self.port = _free_port()
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        while not self.server.started:
            time.sleep(0.02)
        self.url = f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join()


@pytest.fixture
def served(tiny, tokenizer):
    # the server's model is a copy: its weights change only through the HTTP API
    server = Server(create_app(HFEngine(copy.deepcopy(tiny), tokenizer, "fp32"), tokenizer))
    yield ServedEngine(server.url, tokenizer, tiny), tiny
    server.stop()


def _children() -> set[int]:
    """This process's child processes (of every thread; a thread that ends while they are read is skipped)."""
    out: set[int] = set()
    for task in Path("/proc/self/task").iterdir():
        try:
            out.update(int(c) for c in (task / "children").read_text().split())
        except FileNotFoundError:
            continue
    return out


def _trainer_logprobs(model, ids, temperature=1.0):
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([ids])).logits[0, :-1].float() / temperature
    return torch.log_softmax(logits, -1).gather(1, torch.tensor(ids[1:])[:, None])[:, 0]


def test_sampled_ids_and_logprobs_are_the_trainers(served, tokenizer):
    engine, model = served
    prompt = tokenizer("What is 6 times 7?", add_special_tokens=False)["input_ids"]
    out = engine.session(0).generate({0: prompt, 1: prompt, 2: prompt[:3]}, SamplingParams(0.8, 1.0, 12))
    assert sorted(out) == [0, 1, 2]
    for row, sample in out.items():
        ids = [*(prompt if row < 2 else prompt[:3]), *sample.ids]
        assert len(sample.ids) == len(sample.logprobs) == 12 and sample.stop_reason == "length"
        want = _trainer_logprobs(model, ids, 0.8)[-len(sample.ids):]
        assert torch.allclose(torch.tensor(sample.logprobs), want, atol=1e-5)
    ids = [*prompt, *out[0].ids]  # the server's prompt_logprobs: log p(ids[t] | ids[:t]) at temperature 1
    body = {"prompt": ids, "max_tokens": 1, "temperature": 1.0, "prompt_logprobs": 0}
    entries = httpx.post(engine.url + "/v1/completions", json=body).json()["choices"][0]["prompt_logprobs"]
    got = torch.tensor([e[str(t)]["logprob"] for t, e in zip(ids[1:], entries[1:])])
    assert torch.allclose(got, _trainer_logprobs(model, ids), atol=1e-5)


def test_multi_turn_sends_the_whole_prefix_and_feeds_observations(served, tokenizer):
    engine, model = served
    prompts = {0: [5, 6, 7], 1: [8, 9]}
    seen: dict[int, list] = {0: [], 1: []}

    def on_stop(row, sample):
        seen[row].append(sample)
        return [11, 12] if len(seen[row]) < 3 else None  # an observation after each of two actions

    engine.session(0).run(prompts, SamplingParams(1.0, 1.0, 4), on_stop)
    for row, samples in seen.items():
        assert len(samples) == 3
        ids = list(prompts[row])
        for s in samples:  # each action's logprobs are those of the whole prefix before it
            ids += s.ids
            assert torch.allclose(torch.tensor(s.logprobs), _trainer_logprobs(model, ids)[-len(s.ids):], atol=1e-5)
            ids += [11, 12]


@pytest.mark.parametrize("kind", ["served", "embedded"])
def test_a_restart_samples_the_next_action_from_the_new_prompt_alone(kind, served, tiny, tokenizer):
    """`on_stop` returning a `Restart` starts the row over: the next action's logprobs are those of
    the new prompt alone (what a fresh request or a fresh cache gives), not of the history before it.
    Row 1 never restarts and keeps its history. Served over HTTP and in the embedded engine."""
    from agentic_rl.engines.base import Restart

    engine = served[0] if kind == "served" else HFEngine(tiny, tokenizer, "fp32")
    prompts, fresh = {0: [5, 6, 7], 1: [8, 9]}, [21, 22, 23, 24]
    seen: dict[int, list] = {0: [], 1: []}

    def on_stop(row, sample):
        seen[row].append(sample)
        if len(seen[row]) == 3:
            return None
        return Restart(fresh) if row == 0 and len(seen[row]) == 1 else [11, 12]

    engine.session(0).run(prompts, SamplingParams(1.0, 1.0, 4), on_stop)
    a, b = [s.ids for s in seen[0]], [s.ids for s in seen[1]]
    contexts = [(seen[0][0], [*prompts[0], *a[0]]), (seen[0][1], [*fresh, *a[1]]),
                (seen[0][2], [*fresh, *a[1], 11, 12, *a[2]]), (seen[1][2], [*prompts[1], *b[0], 11, 12, *b[1], 11, 12, *b[2]])]
    for sample, ids in contexts:  # each action's logprobs: those of its own context up to it
        assert torch.allclose(torch.tensor(sample.logprobs), _trainer_logprobs(tiny, ids)[-len(sample.ids):], atol=1e-5)
    with_history = _trainer_logprobs(tiny, [*prompts[0], *a[0], *fresh, *a[1]])[-len(a[1]):]
    assert not torch.allclose(torch.tensor(seen[0][1].logprobs), with_history, atol=1e-3)  # the witness


def test_a_stop_string_ends_the_action_as_the_embedded_engine_does(tiny, tokenizer):
    stop = tokenizer.decode([1000])  # a token the tiny model will sample within a few hundred tokens
    embedded = HFEngine(tiny, tokenizer, "fp32")
    server = Server(create_app(HFEngine(tiny, tokenizer, "fp32"), tokenizer))
    try:
        remote = ServedEngine(server.url, tokenizer, tiny)
        params = SamplingParams(0.0, 1.0, 64, (stop,))
        prompt = {0: tokenizer("Count with me:", add_special_tokens=False)["input_ids"]}
        got, want = remote.session(0).generate(prompt, params)[0], embedded.session(0).generate(prompt, params)[0]
        assert got.ids == want.ids and got.stop_reason == want.stop_reason  # greedy: the same tokens and the same stop
    finally:
        server.stop()


def test_a_server_that_is_down_is_a_clear_error(tokenizer):
    with pytest.raises(EngineError, match=r"did not answer /health"):
        ServedEngine(f"http://127.0.0.1:{_free_port()}", tokenizer, timeout_s=2.0)


def _broken_app(kind: str):
    from fastapi import FastAPI

    app = FastAPI()

    @app.get("/health")
    async def health():
        return {"status": "ok", "version": 0}

    @app.post("/v1/completions")
    async def completions(body: dict):
        if body["prompt"][0] == 1:  # only some requests fail; the others answer well
            if kind == "timeout":
                import asyncio

                await asyncio.sleep(3)
            return {"choices": [{"token_ids": [4, 5], "logprobs": {"token_logprobs": [-1.0]}}]}  # 2 ids, 1 logprob
        return {"choices": [{"text": "x", "token_ids": [4], "logprobs": {"token_logprobs": [-0.5]},
                             "finish_reason": "length", "stop_reason": None}]}

    return app


@pytest.mark.parametrize("kind", ["malformed", "timeout"])
def test_a_failed_request_ends_only_its_episode_as_an_infrastructure_failure(kind, tokenizer):
    server = Server(_broken_app(kind))
    try:
        engine = ServedEngine(server.url, tokenizer, timeout_s=1.0)
        done, failed = {}, {}
        engine.session(0).run({0: [1, 2], 1: [3, 2]}, SamplingParams(1.0, 1.0, 1),
                              lambda row, s: done.__setitem__(row, s), on_error=failed.__setitem__)
        assert list(done) == [1] and done[1].ids == (4,) and done[1].stop_reason == "length"
        assert list(failed) == [0] and "failed a completion" in failed[0]
        with pytest.raises(EngineError):  # without on_error, the failure is raised
            engine.session(0).generate({0: [1]}, SamplingParams(1.0, 1.0, 1))
    finally:
        server.stop()


def test_weights_sent_to_the_server_are_served_and_checked(served, tokenizer, tmp_path):
    from agentic_rl.engines.probe import SyncProbe, WeightSyncError

    engine, model = served
    probe = SyncProbe.build(engine, tokenizer, "fp32")
    assert probe.tolerance == 1e-3  # the server said it computes in fp32
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.05 * torch.randn_like(p))
    with pytest.raises(WeightSyncError):  # the trainer moved, the server did not
        probe.check(engine, model)
    assert engine.sync_weights() == 1
    assert probe.check(engine, model) < 1e-5


def test_chat_completions_render_tool_calls_in_and_parse_them_out(served, tokenizer):
    import httpx

    from agentic_rl.engines.server import reply_message
    from agentic_rl.envs.formats import get_format

    engine, _ = served
    tools = [{"type": "function", "function": {"name": "calculator", "description": "evaluate",
                                               "parameters": {"type": "object", "properties": {
                                                   "expression": {"type": "string"}}}}}]
    messages = [{"role": "user", "content": "What is 6*7?"},
                {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {
                    "name": "calculator", "arguments": '{"expression": "6*7"}'}}]},
                {"role": "tool", "tool_call_id": "c1", "content": "42"}]
    r = httpx.post(engine.url + "/v1/chat/completions", json={"messages": messages, "tools": tools, "max_tokens": 8,
                                                              "return_token_ids": True}, timeout=30).json()
    choice = r["choices"][0]
    # the tokenizer's template (our tool ChatML) renders the call and its result, as Hugging Face renders them
    assert choice["prompt_token_ids"] == tokenizer.apply_chat_template(messages, tools=tools, add_generation_prompt=True,
                                                                       tokenize=True)["input_ids"]
    assert '<tool_call>\n{"name": "calculator", "arguments": {"expression": "6*7"}}\n</tool_call><|im_end|>' in \
        tokenizer.decode(choice["prompt_token_ids"]) and len(choice["token_ids"]) == 8
    text = 'Let me compute.\n<tool_call>\n{"name": "calculator", "arguments": {"expression": "6*7"}}\n</tool_call>'
    message = reply_message(get_format("openai"), tokenizer, tokenizer.encode(text) + [tokenizer.eos_token_id],
                            {tokenizer.eos_token_id})
    assert message["content"] == "Let me compute." and message["tool_calls"][0]["function"] == {
        "name": "calculator", "arguments": '{"expression": "6*7"}'}


def test_a_recipe_runs_through_a_managed_server_and_stops_it(tmp_path):
    import json

    from agentic_rl.trainer.config import load_config
    from agentic_rl.trainer.loop import train

    before = _children()
    train(load_config("recipes/tiny.yaml", ["model.precision=fp32", "log.progress=false", "log.tensorboard=false",
                                            "eval.baselines=false", "rollout.engine.name=managed",
                                            f"output_dir={tmp_path}"]))
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    rl = [r for r in rows if r.get("stage") == "rl"]
    # every action sampled over HTTP; the trainer's recompute equals the server's logprobs (fp32 both)
    assert rl and all(r["engine_logprob_abs_diff"] < 1e-4 and r["sync_probe_gap"] < 1e-4 for r in rl)
    assert [r["weight_version"] for r in rl] == [2, 3]  # after SFT's sync, one per step
    assert _children() <= before  # the server is gone


def _load_half(worker, path):
    """Loads only every other tensor of the checkpoint: a partial weight update."""
    from safetensors.torch import load_file

    state = {k: v for f in sorted(Path(path).glob("*.safetensors")) for k, v in load_file(f).items()}
    with worker.lock:
        worker.engine.model.load_state_dict({k: v for i, (k, v) in enumerate(sorted(state.items())) if i % 2},
                                            strict=False)
        return worker.engine.sync_weights()


def _load_nothing(worker, path):
    with worker.lock:
        return worker.engine.sync_weights()  # says it loaded, loaded nothing


def _load_wrong_dtype(worker, path):
    """fp16 bits read as bf16: a classic of hand-written weight transfers."""
    from safetensors.torch import load_file

    state = {k: v for f in sorted(Path(path).glob("*.safetensors")) for k, v in load_file(f).items()}
    with worker.lock:
        worker.engine.model.load_state_dict(
            {k: v.to(torch.float16).view(torch.bfloat16).float() for k, v in state.items()}, strict=False)
        return worker.engine.sync_weights()


@pytest.mark.parametrize("broken", [_load_nothing, _load_half, _load_wrong_dtype])
def test_a_broken_weight_update_on_the_server_is_caught_by_the_probe(broken, served, tokenizer, monkeypatch):
    from agentic_rl.engines.probe import SyncProbe, WeightSyncError
    from agentic_rl.engines.server import BatchingWorker

    engine, model = served
    probe = SyncProbe.build(engine, tokenizer, "fp32")
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.05 * torch.randn_like(p))
    monkeypatch.setattr(BatchingWorker, "load_weights", broken)
    version = engine.sync_weights()
    with pytest.raises(WeightSyncError, match=f"version {version}"):
        probe.check(engine, model)


def test_the_recording_endpoints_record_an_episode_its_reward_and_forget_it(tiny, tokenizer):
    """`serve --record`: two chat calls of one episode, the first reply sent back as it came; the
    episode's rows are one merged row whose trained tokens are the two replies' sampled ids; the
    posted reward is kept; DELETE forgets the episode."""
    import httpx

    from agentic_rl.engines.recorder import Recorder

    engine = HFEngine(copy.deepcopy(tiny), tokenizer, "fp32")
    server_recorder = Recorder(tokenizer, engine.eos_ids)
    server = Server(create_app(engine, tokenizer, recorder=server_recorder))
    try:
        base = server.url + "/episodes/ep1"
        messages = [{"role": "user", "content": "What is 6*7?"}]
        sampled = []
        for _ in range(2):
            r = httpx.post(base + "/v1/chat/completions", timeout=30, json={
                "messages": messages, "max_tokens": 6, "return_token_ids": True}).json()["choices"][0]
            sampled += r["token_ids"]
            messages += [r["message"], {"role": "user", "content": "Again?"}]
        assert httpx.post(base + "/reward", json={"reward": 0.5}).json()["reward"] == 0.5
        got = httpx.get(base).json()
        assert got["calls"] == 2 and got["merged"] and got["reward"] == 0.5
        (row,) = got["rows"]
        assert [i for i, m in zip(row["token_ids"], row["loss_mask"]) if m] == sampled
        assert httpx.post(base + "/reward", json={"reward": "high"}).status_code == 400
        assert httpx.delete(base).json()["calls"] == 2 and httpx.get(base).json()["calls"] == 0
        assert "ep1" not in server_recorder.episodes  # reading a forgotten episode does not open it again
    finally:
        server.stop()
