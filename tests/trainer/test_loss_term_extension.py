"""The loss's extension point: a term of one's own (the example of docs/algorithms/README.md, "Adding
a loss term"), added to the recipe's terms and trained by the real update on the tiny model."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import ClassVar

import torch

from agentic_rl.models.forward import PolicyOutputs
from agentic_rl.models.loader import tiny_model
from agentic_rl.trainer.config import load_config
from agentic_rl.trainer.credit import Credit, compute_advantages
from agentic_rl.trainer.loss_terms import MicroBatch, TermNeeds, build_loss
from agentic_rl.trainer.stats import UpdateStats
from agentic_rl.trainer.update import UpdateBatch, rl_update
from agentic_rl.types import RolloutBatch


@dataclass(frozen=True, kw_only=True)
class EntropyTarget:
    """coef x the token mean of (H_t - target)^2: pulls each trained token's entropy toward `target`
    nats, from above or below (an entropy bonus only pushes up)."""

    coef: float
    target: float
    needs: ClassVar[TermNeeds] = TermNeeds(entropy_grad=True)  # the entropy with its gradient

    def __call__(self, out: PolicyOutputs, mb: MicroBatch, norm: float) -> tuple[torch.Tensor, UpdateStats]:
        gap = ((out.entropy - self.target) ** 2 * mb.mask).sum() / norm
        return self.coef * gap, UpdateStats()


def _plain_entropy_loss(model, trajectories, coef: float, target: float, temperature: float) -> torch.Tensor:
    """The term's value by a plain forward of each row: no masked projection, no shared prompt."""
    total, n = 0.0, 0
    for t in trajectories:
        ids = torch.tensor([t.token_ids()])
        logp = torch.log_softmax(model(ids).logits[0, :-1].float() / temperature, -1)
        entropy = -(logp.exp() * logp).sum(-1)
        m = torch.tensor(t.loss_mask()[1:], dtype=torch.bool)
        total, n = total + ((entropy[m] - target) ** 2).sum(), n + int(m.sum())
    return coef * total / n


def test_a_term_of_ones_own_trains_through_the_update(tokenizer, make_group):
    """One group with no reward spread (every advantage 0): the policy gradient gives nothing, and the
    group still trains because the new term is not advantages-only. One on-policy step of SGD, lr 1,
    unclipped, so the update is minus the gradient of the term alone, computed by a plain forward;
    the forward honours the term's `needs` (a detached entropy would leave the weights unchanged)."""
    gen = torch.Generator().manual_seed(3)
    groups = [make_group(0, [1.0, 1.0, 1.0], gen)]
    cfg = load_config("recipes/tiny.yaml", ["rl.optim.lr=1.0", "rl.optim.max_grad_norm=1e9"])
    term = EntropyTarget(coef=0.01, target=2.0)

    model = tiny_model(tokenizer, seed=0).eval()
    _plain_entropy_loss(model, groups[0].trajectories, term.coef, term.target, cfg.rollout.temperature).backward()
    want = -model.lm_head.weight.grad.clone()

    model = tiny_model(tokenizer, seed=0).eval()
    base = build_loss(cfg, model)
    loss = replace(base, terms=(*base.terms, term))
    assert not base.regularized and loss.regularized
    before = model.lm_head.weight.detach().clone()
    batch = UpdateBatch(RolloutBatch(tuple(groups)), Credit(compute_advantages(groups, cfg.rl.algorithm)))
    m = rl_update(model, torch.optim.SGD(model.parameters(), lr=1.0), batch, loss, cfg.rl.optim,
                  tokenizer.pad_token_id).metrics
    assert m["groups_trained"] == 1 and m["trained_tokens"] == 3 * 10
    got = model.lm_head.weight.detach() - before
    assert want.abs().max() > 0
    # the same sums in fp32 by two kernel paths (the trainer's masked projection, a plain forward): the
    # largest entry is 3.5e-5 and the largest gap measured 3.7e-9, 27x under atol (1e-7, with rtol 1e-4 as
    # the other update-equals-gradient checks of tests/trainer/test_rl_update.py)
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-7)
