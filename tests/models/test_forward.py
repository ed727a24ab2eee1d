"""The training forward pass (`models/forward.py`): under gradient checkpointing, and with the
step's common prompt forwarded once for all micro-batches (`SharedPrompt`)."""

from __future__ import annotations

import pytest
import torch

from agentic_rl.models.forward import policy_forward, shared_prompt, token_logprobs
from agentic_rl.models.loader import enable_gradient_checkpointing
from agentic_rl.trainer.batching import make_batch

HEAD = tuple(range(10, 30))  # the opening of `with_questions`'s prompts (tests/trainer/conftest.py)


def _logprobs_and_grads(model, batch):
    model.zero_grad()
    model.train()
    lp, _ = token_logprobs(model, batch)
    lp.sum().backward()
    return lp.detach(), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


def test_checkpointing_gives_the_same_logprobs_and_gradients(tiny, make_group):
    """Invariant: checkpointing changes memory and compute, never the numbers. A checkpointed layer
    drops the KV cache that carries a group's shared prompt to its rows, so the prompt is forwarded
    in every row instead; were it dropped silently, the rows would lose their prompt and every
    logprob would change."""
    group = make_group(0, [1.0, 0.0, 1.0], torch.Generator().manual_seed(0))
    batch = make_batch(group.trajectories, pad_id=0)
    assert batch.prefix_ids  # the group's prompt is shared, the case that needs care
    lp_plain, grads_plain = _logprobs_and_grads(tiny, batch)
    enable_gradient_checkpointing(tiny)
    lp_ckpt, grads_ckpt = _logprobs_and_grads(tiny, batch)
    assert torch.allclose(lp_plain, lp_ckpt, atol=1e-5)
    assert grads_plain.keys() == grads_ckpt.keys() and grads_plain
    for name, g in grads_plain.items():
        assert torch.allclose(g, grads_ckpt[name], atol=1e-5), name


def _grads(model):
    return {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("one_task", [False, True])
def test_shared_prompt_gives_the_same_logprobs_and_gradients(tiny, make_group, with_questions, one_task):
    """Invariant: forwarding the step's common prompt once, with its gradient collected over the
    micro-batches and sent back at the end, computes what each micro-batch forwarding it again
    computes. Were the collected gradient lost, the prompt's share of every weight's gradient
    would be missing; were the cache reused without it, the rows would see another prompt.
    `one_task`: every micro-batch has the same prompt (a group and a correction of its task), so
    the shared part is the whole prompt and its last hidden state predicts the first trained token."""
    gen = torch.Generator().manual_seed(1)
    groups = with_questions([make_group(i, [1.0, 0.0, 1.0], gen) for i in range(3)])
    if one_task:
        groups = [groups[0], *with_questions([make_group(0, [1.0, 0.0], gen)])]
    tiny.train()
    weights = [torch.rand(len(g.trajectories), 1, generator=gen) for g in groups]  # a different loss a row

    def run(shared):
        tiny.zero_grad(set_to_none=True)
        lps = []
        for g, w in zip(groups, weights):
            batch = make_batch(g.trajectories, pad_id=0)
            lp = policy_forward(tiny, batch, shared=shared).logprobs
            (lp * w).sum().backward()
            lps.append(lp.detach())
        if shared is not None:
            shared.backward()
        return lps, _grads(tiny)

    lp_plain, grads_plain = run(None)
    shared = shared_prompt(tiny, [g.trajectories for g in groups])
    whole = make_batch(groups[0].trajectories, pad_id=0).prefix_ids
    assert shared is not None and shared.ids == (whole if one_task else HEAD)  # not the questions, unless one task
    lp_shared, grads_shared = run(shared)
    for a, b in zip(lp_plain, lp_shared):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)
    assert grads_plain.keys() == grads_shared.keys() and grads_plain
    for name, g in grads_plain.items():
        torch.testing.assert_close(g, grads_shared[name], atol=1e-5, rtol=1e-4, msg=name)


def test_shared_prompt_only_where_it_saves_a_forward(tiny, make_group, with_questions):
    gen = torch.Generator().manual_seed(2)
    groups = with_questions([make_group(i, [1.0, 0.0], gen) for i in range(2)])
    assert shared_prompt(tiny, [g.trajectories for g in groups[:1]]) is None  # one micro-batch: nothing to share
    assert shared_prompt(tiny, [g.trajectories for g in groups], min_tokens=21) is None  # HEAD is 20 tokens
    # the same task in both micro-batches: their whole common prefix is shared, nothing left to forward
    same = shared_prompt(tiny, [groups[0].trajectories, groups[0].trajectories])
    assert same is not None and same.ids == make_batch(groups[0].trajectories, pad_id=0).prefix_ids
    enable_gradient_checkpointing(tiny)
    tiny.train()
    assert shared_prompt(tiny, [g.trajectories for g in groups]) is None  # a recompute would need its graph
