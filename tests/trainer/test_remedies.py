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
    after, events, weights_changed = remedies.apply(names, cfg)
    assert weights_changed  # the rollback restored weights
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


def test_a_rollback_says_whether_it_changed_the_weights(tiny):
    """The loop syncs the sampler on `Remedied.weights_changed`: a rollback before any healthy step
    has nothing to restore, and says so (its event too); after one, it restored the weights."""
    from agentic_rl.trainer.remedies import REMEDIES

    cfg = load_config("recipes/tiny.yaml")
    remedies = Remedies(torch.optim.SGD(tiny.parameters(), lr=0.1), tiny)
    nothing = REMEDIES.get("rollback")(remedies, cfg)
    assert not nothing.weights_changed and nothing.details == {"rolled_back": False} and nothing.cfg is cfg
    remedies.mark_healthy()
    assert REMEDIES.get("rollback")(remedies, cfg).weights_changed


def test_a_remedied_knob_reaches_the_loss(tiny):
    """A run whose remedy raised the entropy bonus trains with an entropy term from the next step on:
    the loss terms are rebuilt from the new config."""
    from agentic_rl.trainer.loss_terms import EntropyTerm, build_loss

    cfg = load_config("recipes/tiny.yaml")
    assert not any(isinstance(t, EntropyTerm) for t in build_loss(cfg, tiny).terms)
    after, _, weights_changed = Remedies(torch.optim.SGD(tiny.parameters(), lr=0.1), tiny).apply(["entropy_bonus"], cfg)
    assert not weights_changed
    assert [t.coef for t in build_loss(after, tiny).terms if isinstance(t, EntropyTerm)] == [1e-3]


def test_after_a_rollback_the_sampler_serves_the_restored_weights(tiny, tokenizer, monkeypatch, tmp_path):
    """The sampler keeps its own bf16 copy of the weights. A rollback restores the policy; the copy
    must follow at once, or the next rollout samples the collapsed policy: the engine's logprobs of
    a fixed sequence equal those of a fresh bf16 copy of the restored policy, bit for bit."""
    import copy
    from types import SimpleNamespace

    from agentic_rl.engines.hf import HFEngine
    from agentic_rl.envs.registry import get_env
    from agentic_rl.monitor.collapse import CollapseMonitor
    from agentic_rl.monitor.logger import MetricsLogger
    from agentic_rl.rollout.loop import RolloutStats
    from agentic_rl.trainer import rl_loop
    from agentic_rl.trainer.episodes import episodes
    from agentic_rl.trainer.producer import Producer
    from agentic_rl.trainer.rollouts import RolloutSetting, make_rollouts
    from agentic_rl.trainer.stats import StepRecord, UpdateHealth

    cfg = load_config("recipes/tiny.yaml", ["rl.collapse.actions=[rollback]"])
    engine = HFEngine(tiny, tokenizer, "bf16")
    opt = torch.optim.AdamW(tiny.parameters(), lr=1e-3)
    remedies = Remedies(opt, tiny)
    remedies.mark_healthy()
    with torch.no_grad():  # the update that collapsed, synced to the sampler as every update is
        for p in tiny.parameters():
            p.add_(0.05 * torch.randn_like(p))
    engine.sync_weights()
    ids = list(range(100, 140))
    collapsed = engine.score(ids)
    monitor = CollapseMonitor()
    monkeypatch.setattr(monitor, "update", lambda record: {"event": "collapse_warning", "evidence": {}})
    rollouts = make_rollouts(RolloutSetting(cfg=cfg, engine=engine, tokenizer=tokenizer,
                                            episodes=episodes(get_env(cfg.env.name), cfg.env.options, cfg.rollout)))
    run = SimpleNamespace(cfg=cfg, engine=engine, model=tiny, probe=None, rollouts=rollouts)  # in process: no Ray workers
    run.producer = Producer(run, first=1, last=0, max_staleness=0)  # nothing left to produce
    record = StepRecord(step=1, rollout={}, update={}, sampler={}, weight_version=1, lr=1e-3,
                        rollout_stats=RolloutStats(1.0, 1, 1), seconds=1.0, groups_sampled=1,
                        groups_kept=1, memory={}, rewards=None,
                        health=UpdateHealth(loss=0.0, grad_norm=0.0, entropy=0.0, nonfinite_minibatches=0))
    rl_loop._watch(monitor, remedies, record, run, MetricsLogger(tmp_path, tensorboard=False))
    restored = copy.deepcopy(tiny).to(torch.bfloat16).eval()
    with torch.no_grad():
        x = torch.tensor([ids])
        want = torch.log_softmax(restored(input_ids=x).logits[0, :-1].float(), -1).gather(1, x[0, 1:, None])[:, 0]
    assert not torch.equal(collapsed, want)
    assert torch.equal(engine.score(ids), want)

