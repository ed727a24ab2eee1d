"""The loss built from a recipe: each policy loss and estimator with its paper's settings unless the
recipe sets them, dual-clip reaching the loss, and the terms a config turns on."""

from __future__ import annotations

import pytest
import torch

from agentic_rl.algorithms.losses import LossInputs
from agentic_rl.trainer.config import load_config
from agentic_rl.trainer.loss_terms import (
    EntropyTerm,
    HindsightTerm,
    KLTerm,
    PolicyTerm,
    TermNeeds,
    build_loss,
    policy_settings,
)


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
    out = term.loss(LossInputs(logprobs_BT=logp, old_logprobs_BT=torch.tensor([[-1.0]]),
                               advantages_BT=torch.tensor([[1.0]]), loss_mask_BT=torch.ones(1, 1),
                               clip_low=term.clip_low, clip_high=term.clip_high))
    out.per_token_loss_BT.sum().backward()
    # loss_t = -w A logp: its gradient in logp is -w A = -0.5
    assert logp.grad.item() == pytest.approx(-0.5)


def test_dual_clip_reaches_the_loss(tiny):
    """rl.algorithm.dual_clip: c caps a negative-advantage token's loss at -c A (Ye et al. 2020): with
    ratio e^2 and A = -1 the PPO loss e^2 becomes 3."""
    term = next(t for t in build_loss(load_config("recipes/tiny.yaml", ["rl.algorithm.dual_clip=3"]), tiny).terms
                if isinstance(t, PolicyTerm))
    x = LossInputs(logprobs_BT=torch.tensor([[2.0]]), old_logprobs_BT=torch.zeros(1, 1),
                   advantages_BT=torch.tensor([[-1.0]]), loss_mask_BT=torch.ones(1, 1), clip_low=term.clip_low,
                   clip_high=term.clip_high, dual_clip=term.dual_clip)
    assert term.loss(x).per_token_loss_BT.item() == pytest.approx(3.0)


def test_the_terms_a_config_turns_on(tiny):
    kinds = lambda *o: [type(t) for t in build_loss(load_config("recipes/tiny.yaml", list(o)), tiny).terms]  # noqa: E731
    assert kinds() == [PolicyTerm]
    assert kinds("rl.algorithm.entropy_coef=0.01", "rl.algorithm.kl_coef=0.1") == [PolicyTerm, EntropyTerm, KLTerm]
    assert kinds("rl.algorithm.kl_coef=0.1", "rl.algorithm.kl_mode=reward") == [PolicyTerm]  # in the reward
    assert kinds("hindsight.coef=0.5") == [PolicyTerm, HindsightTerm]  # on the corrections, in the same list


def test_the_forward_computes_what_the_terms_of_its_rows_need(tiny):
    """The sampled rows' forward at the sampling temperature, with the entropy's gradient when the
    entropy bonus is on; the corrections' at temperature 1 with nothing more (their NLL needs only
    logprobs), whatever the sampled terms need."""
    cfg = load_config("recipes/tiny.yaml", ["rollout.temperature=0.7", "rl.algorithm.entropy_coef=0.01",
                                            "hindsight.coef=0.5"])
    loss = build_loss(cfg, tiny)
    assert [type(t) for t in loss.on("corrections")] == [HindsightTerm]
    assert loss.forward_keywords("sampled") == {"temperature": 0.7, "entropy_grad": True, "full": False,
                                                "value_head": None}
    assert loss.forward_keywords("corrections") == {"temperature": 1.0, "entropy_grad": False, "full": False,
                                                    "value_head": None}
    assert loss.regularized  # the entropy bonus trains groups without advantages; hindsight alone would not
    assert not build_loss(load_config("recipes/tiny.yaml", ["hindsight.coef=0.5"]), tiny).regularized


def test_a_term_names_rows_the_update_knows():
    with pytest.raises(ValueError, match="TermNeeds.rows: 'sample'; known: sampled, corrections"):
        TermNeeds(rows="sample")


@pytest.mark.parametrize("record", ["LossInputs", "Loss", "MicroBatch", "StepRecord", "TermNeeds"])
def test_the_losss_and_the_steps_records_are_frozen_and_keyword_only(record):
    """Six tensors or eleven figures in a row are told apart by name only (`dataclass(kw_only=True)`)."""
    import dataclasses

    from agentic_rl.algorithms import losses
    from agentic_rl.trainer import loss_terms, stats

    cls = next(getattr(m, record) for m in (losses, loss_terms, stats) if hasattr(m, record))
    assert cls.__dataclass_params__.frozen and all(f.kw_only for f in dataclasses.fields(cls))
