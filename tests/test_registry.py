"""The registry: duplicates raise, a miss lists names, entry points plug in explicitly."""

from __future__ import annotations

from importlib import metadata

import pytest

from agentic_rl.registry import Registry


def test_duplicate_and_miss():
    reg = Registry("thing")
    reg.register("a")(len)
    with pytest.raises(ValueError, match="already registered"):
        reg.register("a")(len)
    with pytest.raises(KeyError, match="unknown thing 'b'; known: a"):
        reg["b"]
    assert reg.get("a") is len and "a" in reg and list(reg) == ["a"] and len(reg) == 1


def test_entry_points(monkeypatch):
    ep = metadata.EntryPoint(name="my_adv", value="builtins:abs", group="agentic_rl.advantages")
    monkeypatch.setattr(metadata, "entry_points", lambda group: [ep] if group == ep.group else [])
    reg = Registry("advantage estimator")
    assert reg.load_entry_points("agentic_rl.advantages") == ["my_adv"]
    assert reg.get("my_adv") is abs
