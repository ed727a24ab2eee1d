"""The main job's env: arithmetic and word problems solved by calling a calculator tool.

Options (from the recipe's `env_options`):
  fewshot: bool   prepend two worked examples as real chat turns (the prompt-engineering baseline)
  format_weight   the gated format term of the reward (counts only when the answer is wrong)
  format_needs_tool  the format term also asks for a calculator call (default false)
  format          the tool-call protocol: hermes (default) or openai (messages through a chat template)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agentic_rl.data import calculator as data
from agentic_rl.data.calculator_demos import demonstration
from agentic_rl.envs.base import ToolEnv
from agentic_rl.envs.formats import get_format
from agentic_rl.envs.spec import EnvSpec
from agentic_rl.rewards.base import NumericAnswerReward
from agentic_rl.tools.calculator import calculator

SYSTEM_PROMPT = (
    "You are a careful math assistant with a calculator tool. Do not do arithmetic in your head: "
    "write the calculation as an expression and call the calculator with it. When you have the "
    "result, give the final answer as a number inside <answer></answer> tags."
)


def fewshot_messages() -> list[dict]:
    """Two worked examples (a bare expression and a two-step word problem) from the train templates."""
    tasks = data.make_tasks(40, seed=777, split="train")
    picks = [next(t for t in tasks if t.meta["family"] == f) for f in ("bare", "two_step")]
    messages: list[dict] = []
    for task in picks:
        messages += [{"role": "user", "content": task.prompt}, *demonstration(task, seed=0)]
    return messages


def make_env(options: Mapping[str, Any]) -> ToolEnv:
    fewshot = fewshot_messages() if options.get("fewshot") else ()
    return ToolEnv([calculator], SYSTEM_PROMPT, fewshot=fewshot, format=get_format(options.get("format", "hermes")),
                   timeout_s=float(options.get("tool_timeout_s", 5.0)))


def tasks(split: str, n: int, seed: int):
    return data.make_tasks(n, seed=seed, split=split)


def make_reward(options: Mapping[str, Any]) -> NumericAnswerReward:
    return NumericAnswerReward(float(options.get("format_weight", 0.1)), bool(options.get("format_needs_tool", False)))


OPTIONS = ("format", "tool_timeout_s", "format_weight", "format_needs_tool")


def _spec(name: str, style: str, recover: float = 0.0) -> EnvSpec:
    return EnvSpec(name=name, make_env=make_env, make_reward=make_reward, tasks=tasks, splits=data.SPLITS,
                   options=OPTIONS, demonstration=lambda task, env: demonstration(task, style=style, recover=recover))


SPEC = _spec("calculator", "steps")
# The same tasks, tools, reward and splits; only the demonstrations differ: they open with the plan
# (docs/envs/calculator.md#the-plan-variant-calculator_plan), or solve a two-step problem in one call
# of its whole expression (docs/envs/calculator.md#the-compound-variant-calculator_compound), or do
# either, half and half (docs/envs/calculator.md#the-mixed-variant-calculator_mixed), or solve it in
# one call after naming each earlier step's expression (docs/envs/calculator.md#the-chain-variant-calculator_chain).
PLAN_SPEC = _spec("calculator_plan", "plan")
COMPOUND_SPEC = _spec("calculator_compound", "compound")
MIXED_SPEC = _spec("calculator_mixed", "mixed")
CHAIN_SPEC = _spec("calculator_chain", "chain")
# Compound demonstrations of which a quarter of the word problems first carry the unit into the call,
# read the error and call again (the mistake out of the loss; docs/envs/calculator.md#recovery-demonstrations-calculator_recover).
RECOVER_SPEC = _spec("calculator_recover", "compound", recover=0.25)
SPECS = (SPEC, PLAN_SPEC, COMPOUND_SPEC, MIXED_SPEC, CHAIN_SPEC, RECOVER_SPEC)
