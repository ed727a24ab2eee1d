"""Tool results are read, never trained: the policy loss has zero gradient on observation tokens
(<tool_response>, <information>, <interpreter>) for every policy loss.

Episodes are the envs' own demonstrations replayed through the real rollout loop (ScriptedEngine),
so the observation tokens are the ones a real episode contains.
"""

from __future__ import annotations

import shutil

import pytest
import torch

from agentic_rl.algorithms.aggregation import AGGREGATIONS
from agentic_rl.algorithms.losses import POLICY_LOSSES, LossInputs
from agentic_rl.engines.base import SamplingParams
from agentic_rl.engines.scripted import ScriptedEngine
from agentic_rl.envs.registry import get_env
from agentic_rl.models.forward import policy_forward
from agentic_rl.rollout.demos import demonstrate
from agentic_rl.rollout.loop import Budget, rollout
from agentic_rl.trainer.batching import make_batch
from agentic_rl.types import TrajectoryGroup

ENVS = {"calculator": "<tool_response>", "retool": "<interpreter>", "search_r1": "<information>"}


def _available(name: str) -> bool:
    if name == "retool":
        return shutil.which("bwrap") is not None
    if name == "search_r1":
        try:
            get_env("search_r1")
        except KeyError:
            return False
    return True


def _episodes(name: str, tokenizer, n: int = 2) -> TrajectoryGroup:
    spec = get_env(name)
    tasks = spec.tasks("train", n, 0)
    fmt = spec.make_env({}).format
    actions = [[fmt.render_assistant_body(m) for m in demonstrate(spec, {}, t, tokenizer)[0] if m["role"] == "assistant"]
               for t in tasks]

    def script(row, turn):
        return actions[row][turn] + ("" if turn < len(actions[row]) - 1 else tokenizer.eos_token)

    params = SamplingParams(1.0, 1.0, 256, tuple(fmt.stop_strings))
    groups, _ = rollout(ScriptedEngine(tokenizer, script), lambda: spec.make_env({}), tasks, 1, params,
                        Budget(6, 256, 2048))
    return TrajectoryGroup(tasks[0], tuple(g.trajectories[0] for g in groups))


def _grad_of_logprobs(model, group: TrajectoryGroup, loss_name: str):
    adv = [torch.ones(len(t.token_ids())) for t in group.trajectories]
    batch = make_batch(group.trajectories, 0, adv)
    out = policy_forward(model, batch)
    logp = out.logprobs
    logp.retain_grad()
    mask = batch.loss_mask
    pg = POLICY_LOSSES.get(loss_name)(LossInputs(logprobs_BT=logp, old_logprobs_BT=logp.detach(),
                                                 advantages_BT=batch.advantages, loss_mask_BT=mask,
                                                 clip_low=0.2, clip_high=0.2))
    agg = AGGREGATIONS.get("token-mean")
    agg(pg.per_token_loss_BT, mask, agg.normalizer(mask.sum(1), None)).backward()
    return batch, logp.grad


def _observation_positions(group: TrajectoryGroup, batch) -> torch.Tensor:
    """(B, T) True on tool-result tokens: every fed token after the first action (not the prompt)."""
    obs = torch.zeros(batch.input_ids.shape, dtype=torch.bool)
    p = len(batch.prefix_ids)
    for i, t in enumerate(group.trajectories):
        flags = [k > 0 and not sampled for k, turn in enumerate(t.turns)
                 for sampled in [False] * len(turn.obs_ids) + [True] * len(turn.action_ids)]
        obs[i, : len(flags) - p] = torch.tensor(flags[p:])
    return obs


@pytest.mark.parametrize("name", list(ENVS))
@pytest.mark.parametrize("loss_name", ["ppo_clip", "gspo", "cispo"])
def test_observation_tokens_get_zero_gradient(name, loss_name, tiny, tokenizer):
    if not _available(name):
        pytest.skip(f"{name} needs what this machine lacks (bubblewrap or the search corpus)")
    group = _episodes(name, tokenizer)
    masked = tokenizer.decode([t for tr in group.trajectories for t, m in zip(tr.token_ids(), tr.loss_mask()) if not m])
    assert ENVS[name] in masked  # the result tags are really in the episode, and untrained
    batch, grad = _grad_of_logprobs(tiny, group, loss_name)
    obs = _observation_positions(group, batch)
    assert obs.any()
    assert torch.all(grad[obs] == 0)
    assert torch.all(grad[batch.loss_mask.bool()] != 0)  # every sampled token does get a gradient
