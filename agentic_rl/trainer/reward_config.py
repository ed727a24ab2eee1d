"""The recipe's `reward` section: the components of the reward with their weights and gates, and the
penalties. What the names mean and the rules the check enforces: `rewards/compose.py`, docs/rewards.md."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, kw_only=True)
class RewardTermConfig:
    """One entry of `reward.components` or `reward.penalties` (`rewards/compose.py` names them)."""

    name: str
    weight: float = 1.0
    gate: str = ""  # another component's name: this one counts only on episodes where that one passes (> 0)


@dataclass(frozen=True)
class RewardConfig:
    """The recipe's reward (docs/rewards.md): named components with weights and gates, minus weighted
    penalties. No components = the env's own reward, unchanged."""

    components: list[RewardTermConfig] = field(default_factory=list)
    penalties: list[RewardTermConfig] = field(default_factory=list)  # hacking detectors, subtracted
