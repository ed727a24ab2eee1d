"""A streamed reply's time to first token against its time to the whole reply, through the server:

    python benchmarks/bench_stream.py [--model tiny] [--tokens 64] [--repeats 5] [--threads 1]
        [--decode-only]

Serves the model (`engines/server.py` over the embedded engine, uvicorn on a local port) and asks
it, through the `openai` client, the same chat `--repeats` times with `stream: true` and without
(seeds 0.., `max_tokens` `--tokens`; a reply ending earlier at the end of its turn is counted with its
own length): for the streamed call, the seconds to the first content chunk and to the last chunk;
for the plain call, the seconds to the reply. Then the engine alone (`HFSession.run`, one batch of 8
rows x `--tokens` tokens, best of `--repeats`) without the `on_token` hook and with a no-op one:
what a streamed request's batch costs more, and the non-streamed path as it decodes
(`--decode-only` runs just that, on a tree whose session may have no hook, to compare commits).
Writes benchmarks/results/stream_{model}.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import time
from pathlib import Path

import torch

RESULTS = Path(__file__).resolve().parent / "results"


def _model(name: str):
    from agentic_rl.models.loader import load_model, load_tokenizer, tiny_model

    if name == "tiny":
        tokenizer = load_tokenizer("tiny")
        return tiny_model(tokenizer, seed=0).eval(), tokenizer
    return load_model(name)


def decode(engine, tokens: int, repeats: int) -> dict[str, float]:
    """Best seconds of one batch (8 rows, `tokens` each) without and with a no-op `on_token`."""
    from agentic_rl.engines.base import SamplingParams

    prompts = {r: list(range(100 + r, 130 + r)) for r in range(8)}
    params = SamplingParams(1.0, 1.0, tokens)
    out: dict[str, float] = {}
    for label, kw in [("no_hook", {}), ("no_op_hook", {"on_token": lambda row, tok: None})] * repeats:
        start = time.perf_counter()
        try:
            engine.session(0, {r: r for r in prompts}).run(prompts, params, lambda row, s: None, **kw)
        except TypeError:  # a session without the hook (an older tree)
            continue
        out[label] = round(min(out.get(label, float("inf")), time.perf_counter() - start), 4)
    return out


def served(engine, tokenizer, tokens: int, repeats: int) -> dict:
    import openai

    from agentic_rl.engines.server import create_app
    from tests.engines.test_served import Server

    server = Server(create_app(engine, tokenizer))
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0)
    rows = []
    try:
        for seed in range(repeats + 1):  # the first: a warm-up, not counted
            ask = {"model": "m", "messages": [{"role": "user", "content": "Tell me about the sea."}],
                   "max_tokens": tokens, "seed": seed}
            start, first = time.perf_counter(), None
            text = ""
            for chunk in client.chat.completions.create(stream=True, stream_options={"include_usage": True}, **ask):
                if chunk.choices and chunk.choices[0].delta.content:
                    first = first or time.perf_counter() - start
                    text += chunk.choices[0].delta.content
                if chunk.usage:
                    generated = chunk.usage.completion_tokens
            whole = time.perf_counter() - start
            start = time.perf_counter()
            plain = client.chat.completions.create(**ask)
            rows.append({"seed": seed, "tokens": generated, "first_content_s": round(first or whole, 4),
                         "last_chunk_s": round(whole, 4), "non_streamed_s": round(time.perf_counter() - start, 4),
                         "same_text": text == (plain.choices[0].message.content or "")})
    finally:
        server.stop()
    rows = rows[1:]
    median = {k: round(statistics.median(r[k] for r in rows), 4) for k in ("first_content_s", "last_chunk_s",
                                                                           "non_streamed_s", "tokens")}
    return {"calls": rows, "median": median}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="tiny")
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--decode-only", action="store_true")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    from agentic_rl.engines.hf import HFEngine

    model, tokenizer = _model(args.model)
    engine = HFEngine(model, tokenizer, "fp32")
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    result = {"model": args.model, "tokens": args.tokens, "repeats": args.repeats, "threads": args.threads,
              "commit": commit, "date": time.strftime("%Y-%m-%d"), "decode_8_rows_s": decode(engine, args.tokens,
                                                                                          args.repeats)}
    if not args.decode_only:
        result["served"] = served(engine, tokenizer, args.tokens, args.repeats)
    print(json.dumps({k: v for k, v in result.items() if k != "served"} | {"served": result.get("served", {}).get(
        "median")}, indent=1))
    if not args.decode_only:
        (RESULTS / f"stream_{args.model}.json").write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
