"""Agent programs run concurrently through the recording proxy (`rollout/agents.py`): an `async def`
agent's episodes as tasks on one event loop, a function's on a reused pool of threads, at most
`concurrency` at once. In both, an episode that hangs is given up at its deadline and one whose
agent raises is an infrastructure failure (kind `agent`), each costing only its episode; every
other episode is recorded with exactly the ids and logprobs the proxy returned to its agent, and
samples the same tokens whatever the concurrency."""

from __future__ import annotations

import asyncio
import re
import threading
import time

import openai
import pytest

from agentic_rl.engines.hf import HFEngine
from agentic_rl.envs.registry import get_env
from agentic_rl.rollout.agents import AgentRollouts
from agentic_rl.trainer.config import load_config
from agentic_rl.trainer.episodes import episodes

HANGS, DIES = 1, 2  # the task whose first episode hangs, and the one whose first episode raises
DEADLINE_S = 12.0  # wide: at 4 s, healthy two-call episodes ran past it with both cores busy (seen)


class Watch:
    """What the agents saw: episodes in flight (and the most at once), the threads they ran on, and
    the ids and logprobs the proxy returned for each call."""

    def __init__(self):
        self.lock, self.now, self.most, self.threads, self.returned = threading.Lock(), 0, 0, set(), {}
        self.release = threading.Event()

    def enter(self) -> None:
        with self.lock:
            self.now += 1
            self.most = max(self.most, self.now)
            self.threads.add(threading.current_thread().name)

    def leave(self) -> None:
        with self.lock:
            self.now -= 1


WATCH = Watch()


def _place(base_url: str) -> tuple[int, int]:
    return tuple(map(int, re.search(r"-t(\d+)-g(\d+)/v1$", base_url).groups()))


def _keep(base_url: str, reply) -> list[dict]:
    choice = reply.choices[0].model_dump()
    WATCH.returned.setdefault(base_url, []).append((choice["token_ids"], choice["token_logprobs"]))
    message = reply.choices[0].message.model_dump(exclude_none=True)
    return [message, {"role": "user", "content": "Go on."}]


async def async_agent(task: dict, base_url: str) -> float:
    WATCH.enter()
    try:
        client = openai.AsyncOpenAI(base_url=base_url, api_key="unused", max_retries=0)
        i, g = _place(base_url)
        messages = [{"role": "user", "content": task["prompt"]}]
        for turn in range(2):
            if g == 0 and i == HANGS and turn == 1:
                await asyncio.sleep(3600)  # cancelled at the deadline
            if g == 0 and i == DIES and turn == 1:
                raise RuntimeError("the agent died")
            reply = await client.chat.completions.create(model="policy", messages=messages,
                                                         extra_body={"return_token_ids": True})
            messages += _keep(base_url, reply)
            await asyncio.sleep(0.05)  # the agent's own work between calls: the others go on meanwhile
        return 0.5
    finally:
        WATCH.leave()


def sync_agent(task: dict, base_url: str) -> float:
    WATCH.enter()
    try:
        client = openai.OpenAI(base_url=base_url, api_key="unused", max_retries=0)
        i, g = _place(base_url)
        messages = [{"role": "user", "content": task["prompt"]}]
        for turn in range(2):
            if g == 0 and i == HANGS and turn == 1:
                WATCH.release.wait()  # a blocking wait no timer interrupts: its thread is replaced
            if g == 0 and i == DIES and turn == 1:
                raise RuntimeError("the agent died")
            reply = client.chat.completions.create(model="policy", messages=messages,
                                                   extra_body={"return_token_ids": True})
            messages += _keep(base_url, reply)
            time.sleep(0.05)
        return 0.5
    finally:
        WATCH.leave()


def plain_agent(task: dict, base_url: str) -> float:
    """Two calls, every episode."""
    client = openai.OpenAI(base_url=base_url, api_key="unused", max_retries=0)
    messages = [{"role": "user", "content": task["prompt"]}]
    for _ in range(2):
        messages += _keep(base_url, client.chat.completions.create(model="policy", messages=messages,
                                                                   extra_body={"return_token_ids": True}))
    return 0.5


def _rollout(agent, tiny, tokenizer, concurrency: int, deadline_s: float = DEADLINE_S):
    global WATCH
    WATCH = Watch()
    cfg = load_config("recipes/tiny.yaml", ["rollout.max_new_tokens=4"])
    spec = get_env(cfg.env.name)
    backend = AgentRollouts(agent, HFEngine(tiny, tokenizer, precision="fp32"), tokenizer,
                            episodes(spec, cfg.env.options, cfg.rollout), deadline_s=deadline_s, concurrency=concurrency)
    try:
        return backend.rollout(spec.tasks("train", 4, 0), 2, seed=0), WATCH
    finally:
        WATCH.release.set()
        backend.close()


@pytest.mark.parametrize("agent", [async_agent, pytest.param(sync_agent, marks=pytest.mark.slow)])
def test_concurrent_agents_cost_only_the_hung_and_dead_episodes_and_record_exact_tokens(tiny, tokenizer, agent):
    t0 = time.monotonic()
    (groups, stats), watch = _rollout(agent, tiny, tokenizer, concurrency=3)
    hung, dead = groups[HANGS].trajectories[0], groups[DIES].trajectories[0]
    assert stats.episodes == 8 and hung.infra_failure == dead.infra_failure == "agent"
    assert f"rollout.agent.timeout_s: {DEADLINE_S:g}s" in hung.error and "agent raised RuntimeError: the agent died" in dead.error
    fine = [t for g in groups for t in g.trajectories if t not in (hung, dead)]
    assert len(fine) == 6 and all(t.infra_failure is None and t.reward == 0.5 and len(t.turns) == 2 for t in fine)
    for g, group in enumerate(groups):  # each episode's actions: exactly what its agent was returned
        for j, t in enumerate(group.trajectories):
            if t in fine:
                url = next(u for u in watch.returned if u.endswith(f"s0-t{g}-g{j}/v1"))
                assert [(list(turn.action_ids), list(turn.logprobs)) for turn in t.turns] == watch.returned[url]
    if agent is async_agent:
        assert watch.most == 3  # three at once: concurrent, and never more
        assert watch.threads == {"agentic-rl-agents"}  # one event loop, no thread an episode
    else:  # the same, besides the hung episode, which keeps its thread blocked once given up
        assert 3 <= watch.most <= 3 + 1
        assert len(watch.threads) <= 3 + 1  # a pool of 3 threads, one more in the hung one's place (not 8)
    assert time.monotonic() - t0 < 2.5 * DEADLINE_S  # the hung episode's deadline, and little more


def test_the_episodes_sample_the_same_tokens_whatever_the_concurrency(tiny, tokenizer):
    """Each call draws from a stream seeded by its episode and its place there: one episode at a time
    or all at once, batched differently by the engine, the recorded tokens are the same."""
    alone = _rollout(plain_agent, tiny, tokenizer, concurrency=1, deadline_s=0)[0][0]
    together = _rollout(plain_agent, tiny, tokenizer, concurrency=8, deadline_s=0)[0][0]
    tokens = [[[t.action_ids for t in e.turns] for e in g.trajectories] for g in alone]
    assert all(len(e) == 2 for g in tokens for e in g)
    assert tokens == [[[t.action_ids for t in e.turns] for e in g.trajectories] for g in together]
    assert len({tuple(e[0]) for g in tokens for e in g}) > 1  # the witness: the episodes differ


@pytest.mark.slow  # a server process of its own (~13 s)
def test_the_proxy_in_front_of_a_served_engine_records_what_the_server_sampled(tiny, tokenizer):
    """The proxy over our own server (a real uvicorn serving other weights than the trainer's, seed 5):
    every recorded call is the server's sample, its logprobs those of the served weights and not of
    the trainer's until the sync sends them; after it, the proxy's calls are sampled by the trainer's
    weights at the new version."""
    import copy

    from agentic_rl.engines.served import ServedEngine
    from agentic_rl.engines.server import create_app
    from agentic_rl.models.loader import tiny_model
    from tests.engines.test_served import Server, _trainer_logprobs

    other = tiny_model(tokenizer, seed=5).eval()
    server = Server(create_app(HFEngine(copy.deepcopy(other), tokenizer, "fp32"), tokenizer))
    engine = ServedEngine(server.url, tokenizer, tiny)
    cfg = load_config("recipes/tiny.yaml", ["rollout.max_new_tokens=4"])
    spec = get_env(cfg.env.name)
    backend = AgentRollouts(plain_agent, engine, tokenizer, episodes(spec, cfg.env.options, cfg.rollout), concurrency=4)
    try:
        for sampler, version in ((other, 0), (tiny, 1)):
            groups, _ = backend.rollout(spec.tasks("train", 4, 0), 2, seed=version)
            rows = [t for g in groups for t in g.trajectories]
            assert all(t.infra_failure is None and len(t.turns) == 2 for t in rows)
            for t in rows:
                ids, mask, sampled = t.token_ids(), t.loss_mask(), t.sampled_logprobs()
                at = [k for k in range(1, len(ids)) if mask[k]]
                for model, equal in ((sampler, True), (tiny if sampler is other else other, False)):
                    lps = _trainer_logprobs(model, ids, cfg.rollout.temperature)
                    close = all(abs(lps[k - 1].item() - sampled[k]) < 1e-4 for k in at)
                    assert close is equal
            assert engine.version == version
            engine.sync_weights()  # the trainer's weights (seed 0) to the server: version 1
    finally:
        backend.close()
        server.stop()
