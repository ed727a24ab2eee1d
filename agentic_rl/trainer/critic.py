"""PPO's critic, in the two shapes PPO implementations use.

`rl.critic.kind: value_head` puts a value head on the policy's own hidden states: one forward serves the
policy and the critic, and the value loss also shapes the shared trunk. `rl.critic.kind: model` gives the
critic its own transformer (verl's critic worker): a copy of the policy as RL starts, or
`rl.critic.model` (any model with the policy's tokenizer), with its own forward and learning rate; the
value loss never touches the policy's weights. Either way V(s_t) is read off the hidden state that
predicts token t, on sampled tokens only.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path

import torch
from torch import nn

from agentic_rl.algorithms.value import ValueHead
from agentic_rl.models.device import device_of
from agentic_rl.models.forward import hidden_states
from agentic_rl.registry import Registry
from agentic_rl.types import Batch


class Critic(nn.Module):
    def __init__(self, head: ValueHead, backbone: nn.Module | None = None):
        super().__init__()
        self.head = head
        self.backbone = backbone  # None: the head reads the policy's hidden states

    @property
    def shared(self) -> bool:
        return self.backbone is None

    def values(self, batch: Batch) -> torch.Tensor:
        """(B, T) V(s_t) on the batch's trained positions, 0 elsewhere (separate backbone only; a shared
        head's values come out of the policy's own forward)."""
        if self.backbone is None:
            raise ValueError("a shared value head is evaluated inside the policy forward")
        hidden = hidden_states(self.backbone, batch)
        view = batch.packed if batch.packed is not None else batch  # the layout `hidden` is in
        sel = batch.loss_mask.bool()
        return torch.zeros(sel.shape, device=sel.device).masked_scatter(sel, self.head(hidden[view.loss_mask.bool()]).float())

    def save(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        torch.save(self.head.state_dict(), directory / "value_head.pt")
        if self.backbone is not None:
            self.backbone.save_pretrained(directory / "model")


# rl.critic.kind -> (policy, tokenizer, rl.critic.model) -> the critic, or None
CRITICS: Registry[Callable[..., Critic | None]] = Registry("critic")


@CRITICS.register("none")
def _no_critic(policy, tokenizer, critic_model: str = "") -> None:
    return None


@CRITICS.register("value_head")
def _value_head(policy, tokenizer, critic_model: str = "") -> Critic:
    """A head on the policy's own hidden states."""
    return Critic(ValueHead(policy.config.hidden_size))


@CRITICS.register("model")
def _critic_model(policy, tokenizer, critic_model: str = "") -> Critic:
    """A separate backbone: `critic_model` (sharing the policy's tokenizer), or a copy of the policy."""
    if critic_model:
        from agentic_rl.models.loader import load_model

        backbone, critic_tokenizer = load_model(critic_model)
        if critic_tokenizer.get_vocab() != tokenizer.get_vocab():
            raise ValueError(f"rl.critic.model {critic_model!r} does not share the policy's tokenizer: "
                             "the critic reads the policy's token ids")
    else:
        base = policy.get_base_model() if hasattr(policy, "get_base_model") else policy
        backbone = copy.deepcopy(base)  # the policy as RL starts: the usual critic initialisation
    for p in backbone.parameters():
        p.requires_grad_(True)
    backbone.eval()
    return Critic(ValueHead(backbone.config.hidden_size), backbone)


def make_critic(kind: str, policy, tokenizer, critic_model: str = "") -> Critic | None:
    """The critic named by `kind` (a CRITICS name), on the policy's device."""
    critic = CRITICS.get(kind)(policy, tokenizer, critic_model)
    return None if critic is None else critic.to(device_of(policy))
