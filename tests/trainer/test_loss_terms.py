"""The loss built from a recipe: each policy loss and estimator with its paper's settings unless the
recipe sets them, dual-clip reaching the loss, and the terms a config turns on."""

from __future__ import annotations

import pytest
import torch

from agentic_rl.algorithms.losses import LossInputs
from agentic_rl.trainer.config import load_config
from agentic_rl.trainer.loss_terms import EntropyTerm, KLTerm, PolicyTerm, build_loss, policy_settings


@pytest.mark.parametrize("overrides, want", [
    ([], (0.2, 0.2, "token-mean")),  # PPO's clip range, DAPO's token-level mean
    (["rl.algorithm.policy_loss=gspo"], (3e-4, 4e-4, "seq-mean-token-mean")),  # GSPO: sequence ratio, sequence mean
    (["rl.algorithm.policy_loss=cispo"], (1.0, 4.0, "token-mean")),  # CISPO: no lower bound on the weight
    (["rl.algorithm.advantage=dr_grpo"], (0.2, 0.2, "seq-mean-token-sum-norm")),  # Dr. GRPO's constant normalizer
    (["rl.algorithm.policy_loss=gspo", "rl.algorithm.clip_high=1e-3", "rl.algorithm.aggregation=token-mean"],
     (3e-4, 1e-3, "token-mean")),  # what the recipe sets wins
])
def test_each_policy_loss_gets_its_papers_settings_unless_the_recipe_sets_them(overrides, want):
    s = policy_settings(load_config("recipes/tiny.yaml", overrides).rl.algorithm)
    assert (s.clip_low, s.clip_high, s.aggregation) == want


def test_cispo_leaves_a_small_weight_alone(tiny):
    """CISPO's paper bounds its importance weight only from above: a token whose ratio fell to 0.5
    keeps the weight 0.5 (it was raised to 0.8 by PPO's lower clip before)."""
    term = next(t for t in build_loss(load_config("recipes/tiny.yaml", ["rl.algorithm.policy_loss=cispo"]), tiny).terms
                if isinstance(t, PolicyTerm))
    logp = torch.tensor([[-1.0 + torch.log(torch.tensor(0.5)).item()]], requires_grad=True)
    out = term.loss(LossInputs(logp, torch.tensor([[-1.0]]), torch.tensor([[1.0]]), torch.ones(1, 1),
                               term.clip_low, term.clip_high))
    out.per_token_loss_BT.sum().backward()
    # loss_t = -w A logp: its gradient in logp is -w A = -0.5
    assert logp.grad.item() == pytest.approx(-0.5)


def test_dual_clip_reaches_the_loss(tiny):
    """rl.algorithm.dual_clip: c caps a negative-advantage token's loss at -c A (Ye et al. 2020): with
    ratio e^2 and A = -1 the PPO loss e^2 becomes 3."""
    term = next(t for t in build_loss(load_config("recipes/tiny.yaml", ["rl.algorithm.dual_clip=3"]), tiny).terms
                if isinstance(t, PolicyTerm))
    x = LossInputs(torch.tensor([[2.0]]), torch.zeros(1, 1), torch.tensor([[-1.0]]), torch.ones(1, 1),
                   term.clip_low, term.clip_high, term.dual_clip)
    assert term.loss(x).per_token_loss_BT.item() == pytest.approx(3.0)


def test_the_terms_a_config_turns_on(tiny):
    kinds = lambda *o: [type(t) for t in build_loss(load_config("recipes/tiny.yaml", list(o)), tiny).terms]  # noqa: E731
    assert kinds() == [PolicyTerm]
    assert kinds("rl.algorithm.entropy_coef=0.01", "rl.algorithm.kl_coef=0.1") == [PolicyTerm, EntropyTerm, KLTerm]
    assert kinds("rl.algorithm.kl_coef=0.1", "rl.algorithm.kl_mode=reward") == [PolicyTerm]  # in the reward
