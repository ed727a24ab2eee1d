"""`agentic-rl serve` as its users meet it: a real server process (`python -m agentic_rl.cli serve
tiny`) spoken to through the `openai` package. Every reply carries its token counts, and a request
past the model's context (the tiny model's 4096 positions) is refused with a 400 naming the limit,
as vLLM refuses one. Nothing here can hang: the server's start has a deadline, every request a timeout."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

import httpx
import pytest

CONTEXT = 4096  # the tiny model's max_position_embeddings (models/loader.py)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def client():
    openai = pytest.importorskip("openai")
    port = _free_port()
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "agentic_rl.cli", "serve", "tiny", "--port", str(port),
                             "--precision", "fp32", "--device", "cpu"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    url, deadline = f"http://127.0.0.1:{port}", time.monotonic() + 120  # imports and the model, on a loaded machine
    try:
        while True:
            if proc.poll() is not None:
                pytest.fail(f"agentic-rl serve exited {proc.returncode}: {proc.stderr.read()[-2000:]}")
            try:
                if httpx.get(url + "/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                pytest.fail("agentic-rl serve did not answer /health within 120 s")
            time.sleep(0.2)
        yield openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0, timeout=60)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_every_reply_counts_its_tokens(client):
    out = client.completions.create(model="tiny", prompt="The capital of France is", max_tokens=5,
                                    extra_body={"return_token_ids": True})
    extra = out.choices[0].model_extra  # the token-id fields, vLLM's names
    prompt_ids, ids = extra["prompt_token_ids"], extra["token_ids"]
    assert (out.usage.prompt_tokens, out.usage.completion_tokens, out.usage.total_tokens) == (
        len(prompt_ids), len(ids), len(prompt_ids) + len(ids))
    chat = client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "Hi"}],
                                          max_tokens=3, extra_body={"return_token_ids": True})
    extra = chat.choices[0].model_extra
    assert chat.usage.total_tokens == len(extra["prompt_token_ids"]) + len(extra["token_ids"])
    assert chat.usage.completion_tokens == len(extra["token_ids"]) > 0


def test_a_request_past_the_context_is_refused_naming_the_limit(client):
    import openai

    with pytest.raises(openai.BadRequestError, match=f"maximum context length is {CONTEXT}.*{CONTEXT - 8} prompt"):
        client.completions.create(model="tiny", prompt=[100] * (CONTEXT - 8), max_tokens=16)
    with pytest.raises(openai.BadRequestError, match=f"maximum context length is {CONTEXT}"):
        client.completions.create(model="tiny", prompt=[100] * (CONTEXT + 10), max_tokens=1)
    text = "word " * (CONTEXT + 10)  # a chat past the context, counted after the template
    with pytest.raises(openai.BadRequestError, match=f"maximum context length is {CONTEXT}"):
        client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": text}], max_tokens=1)
    fits = client.completions.create(model="tiny", prompt=[100] * (CONTEXT - 1), max_tokens=1)  # exactly full
    assert fits.usage.total_tokens == CONTEXT
