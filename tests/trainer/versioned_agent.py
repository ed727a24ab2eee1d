"""An agent that keeps the policy version each of its replies says it was sampled by (the proxy's
`weight_version`), by episode id in `VERSIONS`: two calls, then the parity reward of
`scored_agent.py`. `run_async` is the same agent on the `openai` package's async client."""

from __future__ import annotations

import asyncio

from openai import AsyncOpenAI, OpenAI

from tests.trainer.scored_agent import post_parity_reward

VERSIONS: dict[str, list[int]] = {}


def _episode(base_url: str) -> str:
    return base_url.removesuffix("/v1").rsplit("/", 1)[1]


def run(task: dict, base_url: str) -> None:
    client = OpenAI(base_url=base_url, api_key="unused", max_retries=0)
    messages = [{"role": "user", "content": task["prompt"]}]
    for _ in range(2):
        reply = client.chat.completions.create(model="policy", messages=messages)
        VERSIONS.setdefault(_episode(base_url), []).append(reply.model_extra["weight_version"])
        messages += [reply.choices[0].message.model_dump(exclude_none=True), {"role": "user", "content": "Go on."}]
    post_parity_reward(base_url)


async def run_async(task: dict, base_url: str) -> None:
    client = AsyncOpenAI(base_url=base_url, api_key="unused", max_retries=0)
    messages = [{"role": "user", "content": task["prompt"]}]
    for _ in range(2):
        reply = await client.chat.completions.create(model="policy", messages=messages)
        VERSIONS.setdefault(_episode(base_url), []).append(reply.model_extra["weight_version"])
        messages += [reply.choices[0].message.model_dump(exclude_none=True), {"role": "user", "content": "Go on."}]
    await asyncio.to_thread(post_parity_reward, base_url)
