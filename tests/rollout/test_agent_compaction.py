"""An agent program that compacts its own history trains exactly through the recording proxy
(`rollout.agent`): a 24-call episode whose agent summarizes and starts over every 6 calls
(`tests/trainer/compacting_agent.py`, plain `openai` client) is one trajectory of 4 contexts
(`Turn.restart`), with one reward; every turn's tokens decode to the reply the agent was sent, the
summaries are trained like any reply, and the trainer's logprobs of every context, recomputed by a
fresh fp32 forward of the batch, are the sampler's within 1e-4 (the engine computes in fp32 too: the
two forwards differ only by kernel order, measured ~1e-6; a token off by one position is off by nats)."""

from __future__ import annotations

import torch

from agentic_rl.engines.hf import HFEngine
from agentic_rl.envs.registry import get_env
from agentic_rl.models.forward import token_logprobs
from agentic_rl.rollout.agents import AgentRollouts
from agentic_rl.trainer.batching import make_batch
from agentic_rl.trainer.config import load_config
from agentic_rl.trainer.episodes import episodes
from tests.trainer import compacting_agent


def test_a_self_compacting_agent_is_one_trajectory_of_exact_contexts(tiny, tokenizer):
    compacting_agent.REPLIES.clear()
    calls, every = compacting_agent.CALLS, compacting_agent.EVERY
    cfg = load_config("recipes/tiny.yaml", [f"rollout.max_turns={calls}", "rollout.max_new_tokens=4",
                                            "rollout.max_episode_tokens=200"])
    spec = get_env(cfg.env.name)
    agents = AgentRollouts(compacting_agent.run, HFEngine(tiny, tokenizer, precision="fp32"), tokenizer,
                           episodes(spec, cfg.env.options, cfg.rollout))
    try:
        groups, stats = agents.rollout(spec.tasks("train", 1, 0), 2, seed=0)
    finally:
        agents.close()
    assert stats.episodes == 2
    for eid, traj in zip(["s0-t0-g0", "s0-t0-g1"], groups[0].trajectories):
        assert traj.infra_failure is None and not traj.truncated
        assert len(traj.turns) == calls and traj.restarts == calls // every - (calls % every == 0)
        assert [i for i, t in enumerate(traj.turns) if t.restart and i] == list(range(every, calls, every))
        assert [tokenizer.decode(t.action_ids, skip_special_tokens=True) for t in traj.turns] == \
            compacting_agent.REPLIES[eid]
        assert traj.reward == float(len(compacting_agent.REPLIES[eid][0]) % 2)
        contexts = traj.contexts()
        assert len(contexts) == traj.restarts + 1
        for i in range(every, calls, every):  # a new context opens on the summary the policy just wrote
            opening = tokenizer.decode(traj.turns[i].obs_ids)
            assert opening.startswith("<|im_start|>system\n" + compacting_agent.SYSTEM)
            assert f"Your summary of the work so far: {compacting_agent.REPLIES[eid][i - 1]}" in opening
        mask = traj.loss_mask()
        assert sum(mask) == sum(len(t.action_ids) for t in traj.turns)  # summaries trained with the rest
        batch = make_batch(contexts, tokenizer.pad_token_id)
        with torch.no_grad():
            logp, _ = token_logprobs(tiny, batch)
        m = batch.loss_mask.bool()
        torch.testing.assert_close(logp[m], batch.sampler_logprobs[m], atol=1e-4, rtol=0)
