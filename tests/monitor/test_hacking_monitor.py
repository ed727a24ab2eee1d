"""The hacking monitor warns when a `hacking/` rate climbs a window above its lowest one, and not
while the rates hold still."""

from __future__ import annotations

from agentic_rl.monitor.hacking import HackingMonitor


def test_a_climbing_rate_warns_with_its_evidence_once_a_window():
    monitor = HackingMonitor(window=2, rise=0.2)
    rates = [0.0, 0.1, 0.0, 0.1, 0.4, 0.5, 0.6, 0.6]
    events = [monitor.update({"hacking/format_gaming": r, "hacking/unused_tool_result": 0.3, "reward_mean": 1.0})
              for r in rates]
    # windows of 2: means 0.05 0.05 0.05 0.25 0.45 0.55 0.6; the first more than 0.2 above the lowest
    # ends at index 5 (0.45); the cooldown of a window holds the next one to index 7
    assert [i for i, e in enumerate(events) if e] == [5, 7]
    evidence = events[5]["evidence"]
    assert events[5]["event"] == "hacking_warning" and set(evidence) == {"hacking/format_gaming"}
    assert evidence["hacking/format_gaming"] == {"lowest_window": 0.05, "now": 0.45}


def test_steady_rates_never_warn():
    monitor = HackingMonitor(window=2)
    assert all(monitor.update({"hacking/format_gaming": 0.5}) is None for _ in range(10))
