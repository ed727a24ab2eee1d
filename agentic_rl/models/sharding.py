"""A policy sharded over the ranks with FSDP2 (`torch.distributed.fsdp.fully_shard`).

Each decoder layer is its own FSDP unit (its parameters gathered for its forward and backward, its
gradients reduce-scattered); the rest (embeddings, the final norm, a head tied to the embeddings)
belongs to one root unit around the whole model, `_Root`. Every forward of a sharded policy runs
inside the root's forward (`call`), so the root's parameters are gathered while any code reads them,
and it is a collective: every rank runs the same number of them.

What reads whole weights (the sampler's copy, checkpoints, a KL reference) asks `full_state_dict`,
also a collective: every rank calls it, each gets the whole tensors.
"""

from __future__ import annotations

import copy
import weakref
from collections.abc import Callable
from typing import Any

import torch

from agentic_rl.models.device import device_of
from agentic_rl.models.forward import _decoder

_ROOTS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # policy -> its `_Root`, once sharded


class _Root(torch.nn.Module):
    """The root FSDP unit: `root(fn, *args)` runs `fn(model, *args)` inside its forward."""

    def __init__(self, model: torch.nn.Module):
        super().__init__()
        self.model = model

    def forward(self, fn: Callable[..., Any], *args, **kw) -> Any:
        return fn(self.model, *args, **kw)


def shard(model: torch.nn.Module, mesh=None) -> torch.nn.Module:
    """Shard `model` in place over the default process group (FSDP2, one unit a decoder layer);
    returns the root. Gradients are reduced as sums (each rank's loss is already divided by the
    global normalizer)."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import FSDPModule, fully_shard

    if model in _ROOTS:
        return _ROOTS[model]
    if mesh is None:
        device = next(model.parameters()).device
        mesh = init_device_mesh(device.type, (torch.distributed.get_world_size(),))
    for layer in _decoder(model).layers:
        fully_shard(layer, mesh=mesh)
    root = fully_shard(_Root(model), mesh=mesh)
    for m in root.modules():
        if isinstance(m, FSDPModule):
            m.set_gradient_divide_factor(1.0)
            m.set_force_sum_reduction_for_comms(True)  # a plain sum (gloo has no pre-multiplied sum)
    _ROOTS[model] = root
    return root


def root(model) -> torch.nn.Module | None:
    """The FSDP root of a sharded policy; None when it is not sharded."""
    return _ROOTS.get(model)


def call(model, fn: Callable[..., Any], *args, **kw) -> Any:
    """`fn(model, *args, **kw)`; for a sharded policy inside its root's forward (a collective)."""
    r = _ROOTS.get(model)
    return r(fn, *args, **kw) if r is not None else fn(model, *args, **kw)


def full_state_dict(model) -> dict[str, torch.Tensor]:
    """The model's state with whole tensors (a collective for a sharded policy: every rank calls
    it); the model's own `state_dict()` otherwise."""
    if model not in _ROOTS:
        return model.state_dict()
    return _whole(model.state_dict(keep_vars=True))


def full_parameters(model) -> dict[str, torch.Tensor]:
    """The named parameters as whole tensors (a collective for a sharded policy)."""
    params = dict(model.named_parameters())
    return params if model not in _ROOTS else _whole(params)


def full_copy(model) -> torch.nn.Module:
    """An unsharded copy of the policy with its current weights (a collective when sharded)."""
    if model not in _ROOTS:
        return copy.deepcopy(model)
    from transformers import AutoModelForCausalLM

    out = AutoModelForCausalLM.from_config(model.config, dtype=torch.float32)
    out.load_state_dict(full_state_dict(model))
    return out.to(device_of(model))


def optimizer_state(model, optimizer) -> dict:
    """The optimizer's state to checkpoint: its own `state_dict()`, or for a sharded policy the whole
    state keyed by parameter name (a collective)."""
    if model not in _ROOTS:
        return optimizer.state_dict()
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_optimizer_state_dict

    return get_optimizer_state_dict(model, optimizer, options=StateDictOptions(full_state_dict=True,
                                                                               cpu_offload=True))


def load_optimizer_state(model, optimizer, state: dict) -> None:
    """The inverse of `optimizer_state`: every rank passes the whole state, each keeps its shard."""
    if model not in _ROOTS:
        optimizer.load_state_dict(state)
        return
    from torch.distributed.checkpoint.state_dict import StateDictOptions, set_optimizer_state_dict

    set_optimizer_state_dict(model, optimizer, state, options=StateDictOptions(full_state_dict=True))


def _whole(tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Each DTensor gathered whole, once: tied weights (one parameter under two names) stay one
    tensor, as a checkpoint writer expects of them."""
    from torch.distributed.tensor import DTensor

    memo: dict[int, torch.Tensor] = {}
    out = {}
    for k, v in tensors.items():
        if isinstance(v, DTensor):
            if id(v) not in memo:
                memo[id(v)] = v.full_tensor()
            v = memo[id(v)]
        out[k] = v.detach()
    return out


def value(t: torch.Tensor) -> float:
    """A scalar a sharded computation returned (a replicated DTensor, e.g. a clipped gradient's
    norm) as a float."""
    from torch.distributed.tensor import DTensor

    return float(t.full_tensor() if isinstance(t, DTensor) else t)
