"""`rl.freeze_layers` (`trainer/freeze.py`): the lowest layers frozen, the backward pass stopped
below the layers that train."""

from __future__ import annotations

import pytest
import torch

from agentic_rl.trainer.config import load_config
from agentic_rl.trainer.credit import compute_advantages
from agentic_rl.trainer.freeze import freeze_lower_layers
from agentic_rl.trainer.rl import rl_update


def _grads(tokenizer, groups, cfg, freeze: int):
    from agentic_rl.models.loader import tiny_model

    model = tiny_model(tokenizer, seed=0).eval()
    hook = freeze_lower_layers(model, freeze)
    seen = {}
    params = [p for p in model.parameters() if p.requires_grad]

    class Spy(torch.optim.SGD):  # keeps each parameter's gradient at the optimizer step
        def step(self, closure=None):
            seen.update({n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None})
            return super().step(closure)

    rl_update(model, Spy(params, lr=0.0), groups, compute_advantages(groups, cfg.rl), cfg, tokenizer.pad_token_id)
    return model, hook, seen


def test_frozen_layers_get_no_gradient_and_the_others_the_same_one(tokenizer, make_group, with_questions):
    """Invariant: freezing the lowest layer removes its gradient (and the input lookup's) and leaves
    every gradient above it as it was: the layers above never read a gradient from below. fp32; the
    step's system prompt is shared (`SharedPrompt`), so its frozen keys and values are exercised."""
    gen = torch.Generator().manual_seed(3)
    groups = with_questions([make_group(i, r, gen) for i, r in enumerate([[1.0, 0.0, 0.0], [0.0, 1.0, 1.0]])])
    cfg = load_config("recipes/tiny.yaml", ["rl.max_grad_norm=1e9"])  # unclipped: the norm spans what trains
    _, _, full = _grads(tokenizer, groups, cfg, 0)
    model, hook, part = _grads(tokenizer, groups, cfg, 1)
    frozen = {n for n in full if ".layers.0." in n}
    assert frozen and not frozen & set(part)
    assert hook is not None
    for name, g in part.items():
        if "embed_tokens" in name or "lm_head" in name:  # tied: only the projection's share is left
            continue
        torch.testing.assert_close(g, full[name], rtol=1e-5, atol=1e-7, msg=name)
    assert set(part) | frozen >= set(full) - {n for n in full if "embed_tokens" in n or "lm_head" in n}
    tied = model.get_input_embeddings().weight
    assert tied.requires_grad  # the tied output projection still trains


def test_freezing_more_layers_than_the_model_has_is_an_error(tokenizer):
    from agentic_rl.models.loader import tiny_model

    model = tiny_model(tokenizer, seed=0)
    n = len(model.get_decoder().layers)
    with pytest.raises(ValueError, match="decoder layers"):
        freeze_lower_layers(model, n + 1)
    assert freeze_lower_layers(model, 0) is None
