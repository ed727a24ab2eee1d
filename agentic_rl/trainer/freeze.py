"""`rl.freeze_layers`: RL trains only the upper decoder layers (and the output projection).

With the lowest n layers frozen and the input embeddings' output detached, nothing below layer n
needs a gradient, so the backward pass stops there: no activation gradients, no weight gradients,
no optimizer state for those layers. On SmolLM2-135M with n = 10 of 30 the calculator recipe's update
took 26.9 s against 32.6 s (docs/results.md, session 41). A tied output embedding (SmolLM2's) keeps
learning through the vocabulary projection; an untied input embedding is frozen with the layers.
The gradients of the layers that train are unchanged (tested): freezing removes work, not signal
that reaches them.
"""

from __future__ import annotations


def _base(model):
    return model.get_base_model() if hasattr(model, "get_base_model") else model


def freeze_lower_layers(model, n: int):
    """Freeze the lowest `n` decoder layers of `model` in place; returns the hook that detaches the
    input embeddings (its `remove()` lets gradients reach them again), or None for n = 0."""
    if n <= 0:
        return None
    base = _base(model)
    layers = base.get_decoder().layers
    if n > len(layers):
        raise ValueError(f"rl.freeze_layers={n}, but the model has {len(layers)} decoder layers")
    for layer in layers[:n]:
        layer.requires_grad_(False)
    embed = base.get_input_embeddings()
    output = base.get_output_embeddings()
    if output is None or output.weight is not embed.weight:
        embed.requires_grad_(False)
    return embed.register_forward_hook(lambda module, args, out: out.detach())
