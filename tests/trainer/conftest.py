"""Trainer fixtures: the model a whole run trained, and its weights before training."""

from __future__ import annotations

import pytest


@pytest.fixture
def snapshot(monkeypatch):
    """Patches `loop.prepare` to keep the model and a copy of its weights before training."""
    from agentic_rl.trainer import loop

    taken = {}
    real_prepare = loop.prepare

    def prepare(cfg):
        model, tok, spec = real_prepare(cfg)
        taken["before"] = {k: v.detach().clone() for k, v in model.state_dict().items()}
        taken["model"] = model
        return model, tok, spec

    monkeypatch.setattr(loop, "prepare", prepare)
    return taken
