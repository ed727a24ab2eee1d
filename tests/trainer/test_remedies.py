"""Each remedy changes what the next step does: a knob in a new config (the old one unchanged), the
optimizer's learning rate, or the weights of the last healthy step."""

from __future__ import annotations

import pytest
import torch

from agentic_rl.algorithms.filters import keep_top_spread
from agentic_rl.trainer.config import load_config
from agentic_rl.trainer.remedies import Remedies


def test_each_remedy_changes_the_next_step(tiny, make_group):
    cfg = load_config("recipes/tiny.yaml")
    opt = torch.optim.AdamW(tiny.parameters(), lr=1e-3)
    remedies = Remedies(opt, tiny)
    remedies.mark_healthy()
    healthy = {k: v.clone() for k, v in tiny.state_dict().items()}
    with torch.no_grad():
        next(tiny.parameters()).add_(1.0)  # the run drifts after the healthy point
    names = ["variance_filter", "entropy_bonus", "clip_high", "lower_lr", "rollback"]
    after, events = remedies.apply(names, cfg)
    assert [e["action"] for e in events] == names
    assert events[0]["variance_keep"] == [1.0, 0.5] and events[2]["clip_high"] == [0.2, pytest.approx(0.28)]
    alg = after.rl.algorithm
    assert after.rl.filters.variance_keep == 0.5 and alg.entropy_coef > 0 and alg.clip_high == pytest.approx(0.28)
    assert cfg.rl.filters.variance_keep == 1.0 and cfg.rl.algorithm.entropy_coef == 0.0  # the old config stays
    assert opt.param_groups[0]["lr"] == pytest.approx(5e-4)
    assert all(torch.equal(v, tiny.state_dict()[k]) for k, v in healthy.items())
    # the filter really drops the low-variance groups at the next step
    groups = [make_group(i, r, torch.Generator().manual_seed(i)) for i, r in
              enumerate([[1.0, 1.0], [1.0, 0.0], [0.5, 0.5], [0.0, 1.0]])]
    kept = keep_top_spread(groups, after.rl.filters.variance_keep)
    assert [g.task.id for g in kept] == ["1", "3"]


def test_a_remedied_knob_reaches_the_loss(tiny):
    """A run whose remedy raised the entropy bonus trains with an entropy term from the next step on:
    the loss terms are rebuilt from the new config."""
    from agentic_rl.trainer.loss_terms import EntropyTerm, build_loss

    cfg = load_config("recipes/tiny.yaml")
    assert not any(isinstance(t, EntropyTerm) for t in build_loss(cfg, tiny).terms)
    after, _ = Remedies(torch.optim.SGD(tiny.parameters(), lr=0.1), tiny).apply(["entropy_bonus"], cfg)
    assert [t.coef for t in build_loss(after, tiny).terms if isinstance(t, EntropyTerm)] == [1e-3]
