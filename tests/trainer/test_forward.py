"""The training forward pass (`trainer/forward.py`) under gradient checkpointing."""

from __future__ import annotations

import torch

from agentic_rl.models.loader import enable_gradient_checkpointing
from agentic_rl.trainer.forward import make_batch, token_logprobs


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
