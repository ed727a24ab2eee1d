"""The example agent with a reward that varies on a random tiny model (which never solves a task): it
posts to the proxy's reward endpoint whether the token ids of the policy's first reply add up to an
even number, read from the episode's recorded rows (`GET /episodes/{id}`)."""

from __future__ import annotations

import httpx

from examples import openai_calculator_agent as example


def run(task: dict, base_url: str) -> None:
    example.run(task, base_url)
    post_parity_reward(base_url)


def post_parity_reward(base_url: str) -> None:
    """Reward the episode with the parity of its first reply's token ids, read from its rows."""
    episode = base_url.removesuffix("/v1")
    row = httpx.get(episode).json()["rows"][0]
    ids, mask = row["token_ids"], row["loss_mask"]
    start = mask.index(1)
    end = next((k for k in range(start, len(mask)) if not mask[k]), len(mask))
    httpx.post(episode + "/reward", json={"reward": float(sum(ids[start:end]) % 2 == 0)}).raise_for_status()
