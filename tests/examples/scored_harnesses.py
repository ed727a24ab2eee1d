"""The harness examples with a reward that spreads on a random tiny model (which never solves a
task): each episode of a group gets 1 when its index is even, else 0, posted to the proxy's reward
endpoint after the example ran (a posted reward wins over the example's own). Every group then has
both rewards, so every episode's sampled tokens train."""

from __future__ import annotations

import importlib

import httpx


def _post_alternating_reward(base_url: str) -> None:
    episode = base_url.removesuffix("/v1")
    index = int(episode.rsplit("-g", 1)[1])
    httpx.post(episode + "/reward", json={"reward": float(index % 2 == 0)}).raise_for_status()


def _scored(example: str):
    """`examples/{example}.py`'s run, then the alternating reward (imported when called: each
    example needs its own framework, and a test skips when that one is missing)."""
    def run(task: dict, base_url: str) -> None:
        importlib.import_module(f"examples.{example}").run(task, base_url)
        _post_alternating_reward(base_url)
    return run


langgraph = _scored("langgraph_react_agent")
agents_sdk = _scored("agents_sdk_agent")
smolagents = _scored("smolagents_code_agent")
mini_swe = _scored("mini_swe_agent")
