"""Context budgets (`rollout.context`, rollout/context.py) through the real rollout loop: a scripted
agent reads long observations until its context would overflow; each strategy starts a new context
that fits, what it drops or cuts is marked, the policy's own summary is a trained turn the env never
sees, and every context is a row of exactly what was fed and sampled."""

from __future__ import annotations

import pytest

from agentic_rl.engines.base import SamplingParams
from agentic_rl.engines.scripted import ScriptedEngine
from agentic_rl.envs.base import ToolEnv
from agentic_rl.models.loader import load_tokenizer
from agentic_rl.rollout.context import DROPPED, SUMMARY_PREFIX, SUMMARY_REQUEST, ContextPolicy
from agentic_rl.rollout.loop import Budget, rollout
from agentic_rl.types import Task

PAGE = "The page says: " + " ".join(f"fact{k}" for k in range(60))  # about 200 tokens a read
calls = []


def read(page: int) -> str:
    """Read one page of the manual.

    Args:
        page: which page.
    """
    calls.append(page)
    return f"page {page}. {PAGE}"


def _episode(strategy: str, budget_tokens: int = 700, turns: int = 6):
    tokenizer = load_tokenizer("tiny")
    eot = tokenizer.eos_token

    def script(row: int, turn: int) -> str:
        if turn == turns - 1:
            return f"<answer>done</answer>{eot}"
        if strategy == "compact" and turn == 2:  # the action after the request (two reads overflow 700)
            return f"I read pages 0-1; each lists fact0-fact59. Next: page 3.{eot}"
        return f'<tool_call>\n{{"name": "read", "arguments": {{"page": {turn}}}}}\n</tool_call>'

    calls.clear()
    policy = ContextPolicy(strategy, budget_tokens) if strategy != "none" else None
    groups, _ = rollout(ScriptedEngine(tokenizer, script), lambda: ToolEnv([read], "You read manuals."),
                        [Task("t", "What does the manual say?", "done")], 1,
                        SamplingParams(1.0, 1.0, 64, ("</tool_call>",)), Budget(turns, 64, 2000, context=policy))
    return groups[0].trajectories[0], tokenizer


def _fed_text(turn, tokenizer) -> str:
    return tokenizer.decode(list(turn.obs_ids), skip_special_tokens=False)


def test_without_a_budget_the_context_only_grows():
    t, _ = _episode("none")
    assert t.restarts == 0 and len(t.token_ids()) > 700


@pytest.mark.parametrize("strategy, marker", [("drop_observations", DROPPED), ("truncate_observations", "characters cut")])
def test_a_strategy_starts_a_context_that_fits_and_marks_what_it_took(strategy, marker):
    t, tokenizer = _episode(strategy)
    assert t.restarts >= 1 and t.terminated
    for context in t.contexts():  # each context: its prompt and actions, the next action's room included
        assert len(context.token_ids()) <= 700
    first = next(turn for k, turn in enumerate(t.turns) if turn.restart and k)
    text = _fed_text(first, tokenizer)
    assert marker in text and text.count("page ") >= 2  # older pages marked, the last one whole
    assert PAGE in text.split(marker)[-1]
    assert calls == [0, 1, 2, 3, 4]  # the env saw every action once


def test_compaction_is_the_policys_own_summary_trained_and_never_sent_to_the_env():
    t, tokenizer = _episode("compact")
    k = next(i for i, turn in enumerate(t.turns) if turn.restart and i)
    summary, after = t.turns[k], t.turns[k + 1]
    assert SUMMARY_REQUEST in _fed_text(summary, tokenizer)  # its context: the whole conversation, the request
    assert summary.action_text.startswith("I read pages 0-1") and summary.observation == "" and summary.trained
    assert after.restart and SUMMARY_PREFIX + "I read pages 0-1" in _fed_text(after, tokenizer)
    assert "page 0." not in _fed_text(after, tokenizer)  # the old conversation is gone from the context
    assert calls == [0, 1, 3, 4]  # the summary turn stepped no env; the episode went on after it
    row = t.contexts()[1]  # the summary's own context: the request prompt fed, the summary trained
    assert row.loss_mask() == [0] * len(summary.obs_ids) + [1] * len(summary.action_ids)


def test_the_recipe_checks_the_strategy_and_the_budget():
    from agentic_rl.trainer.checks import check_config
    from agentic_rl.trainer.config import ConfigError, load_config

    with pytest.raises(ConfigError, match="rollout.context.strategy: unknown 'forget'"):
        check_config(load_config("recipes/tiny.yaml", ["rollout.context.strategy=forget"]))
    with pytest.raises(ConfigError, match="budget_tokens must exceed rollout.max_new_tokens"):
        check_config(load_config("recipes/tiny.yaml", ["rollout.context.strategy=compact", "rollout.context.budget_tokens=10"]))
