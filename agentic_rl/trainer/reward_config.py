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
class JudgeConfig:
    """`reward.judge`: the LLM judge of the `judge` component and of `rl.algorithm.process_reward: judge`
    (`rewards/judge.py`). Frozen; its answers are kept by content; a judge that cannot grade is an
    infrastructure failure of kind judge, never a zero."""

    model: str = ""  # "policy" (the run's starting model), a model the loader reads (smollm2, a local directory); "" = none
    url: str = ""  # an OpenAI-compatible /v1 URL to ask instead (with `model` the name it serves)
    rubric: str = ""  # "" = correct and complete (`judge.DEFAULT_RUBRIC`)
    whole_episode: bool = False  # grade every action of the episode, not only its final answer
    max_new_tokens: int = 64  # an embedded judge's answer
    timeout_s: float = 30.0  # a URL judge's request
    turn_weight: float = 0.2  # process_reward judge: a turn's reward is turn_weight x (score - 0.5)


@dataclass(frozen=True)
class RewardConfig:
    """The recipe's reward (docs/rewards.md): named components with weights and gates, minus weighted
    penalties. No components = the env's own reward, unchanged."""

    components: list[RewardTermConfig] = field(default_factory=list)
    penalties: list[RewardTermConfig] = field(default_factory=list)  # hacking detectors, subtracted
    judge: JudgeConfig = field(default_factory=JudgeConfig)
