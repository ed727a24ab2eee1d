"""The harness examples with a reward that spreads on a random tiny model (which never solves a
task): each episode of a group gets 1 when its index is even, else 0, posted to the proxy's reward
endpoint after the example ran (a posted reward wins over the example's own). Every group then has
both rewards, so every episode's sampled tokens train."""

from __future__ import annotations

import httpx

from examples import agents_sdk_agent, langgraph_react_agent, mini_swe_agent, smolagents_code_agent


def _post_alternating_reward(base_url: str) -> None:
    episode = base_url.removesuffix("/v1")
    index = int(episode.rsplit("-g", 1)[1])
    httpx.post(episode + "/reward", json={"reward": float(index % 2 == 0)}).raise_for_status()


def langgraph(task: dict, base_url: str) -> None:
    langgraph_react_agent.run(task, base_url)
    _post_alternating_reward(base_url)


def agents_sdk(task: dict, base_url: str) -> None:
    agents_sdk_agent.run(task, base_url)
    _post_alternating_reward(base_url)


def smolagents(task: dict, base_url: str) -> None:
    smolagents_code_agent.run(task, base_url)
    _post_alternating_reward(base_url)


def mini_swe(task: dict, base_url: str) -> None:
    mini_swe_agent.run(task, base_url)
    _post_alternating_reward(base_url)
