"""Keeping an episode within a context budget (`rollout.context`): long episodes outgrow the model's
context and the memory long before they run out of turns.

When the next observation would bring the episode's current context past `budget_tokens` (leaving
room for one more action), the strategy rewrites the conversation and the episode's context starts
over from its rendering (an `engines.base.Restart`, as for templates that rewrite history: the
trainer trains each context exactly as it was fed and sampled, one trajectory, one reward):

- `drop_observations`: every tool observation but the last `keep_last` becomes a marker;
- `truncate_observations`: each observation but the last `keep_last` is cut to `observation_chars`
  with a marker saying how much was cut (and, if that is not enough, the observations are dropped);
- `compact`: the policy itself is asked to summarize its progress (a turn of its own, trained like
  any action, never sent to the env); the episode then continues from the system prompt, the task
  and that summary.

The strategies are a registry (`CONTEXT_STRATEGIES`); each maps the conversation after the prompt to
a shorter one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from agentic_rl.envs.formats import bos_text
from agentic_rl.registry import Registry

DROPPED = "[observation dropped to fit the context]"
SUMMARY_REQUEST = ("Your context is nearly full. Summarize your progress so far: what you found, what you "
                   "tried, and what is left to do. Your summary replaces the conversation so far.")
SUMMARY_PREFIX = "Summary of your progress so far (the conversation before it was replaced by it):\n"


@dataclass(frozen=True)
class ContextPolicy:
    strategy: str  # a name of CONTEXT_STRATEGIES, or "compact"
    budget_tokens: int  # the most tokens a context may hold, an action's room included
    keep_last: int = 1  # observations kept whole (drop and truncate)
    observation_chars: int = 200  # truncate: what an older observation keeps


Rewrite = Callable[[Sequence[dict], ContextPolicy], list[dict]]
CONTEXT_STRATEGIES: Registry[Rewrite] = Registry("context strategy")


def _older_observations(history: Sequence[dict], keep_last: int) -> set[int]:
    """Indices of the tool observations of `history` but its last `keep_last`."""
    tools = [i for i, m in enumerate(history) if m.get("role") == "tool"]
    return set(tools[: max(len(tools) - keep_last, 0)])


@CONTEXT_STRATEGIES.register("drop_observations")
def drop_observations(history: Sequence[dict], policy: ContextPolicy) -> list[dict]:
    older = _older_observations(history, policy.keep_last)
    return [{**m, "content": DROPPED} if i in older else dict(m) for i, m in enumerate(history)]


@CONTEXT_STRATEGIES.register("truncate_observations")
def truncate_observations(history: Sequence[dict], policy: ContextPolicy) -> list[dict]:
    older, n = _older_observations(history, policy.keep_last), policy.observation_chars
    out = []
    for i, m in enumerate(history):
        text = m.get("content", "")
        if i in older and len(text) > n:
            m = {**m, "content": f"{text[:n]}[... {len(text) - n} characters cut to fit the context]"}
        out.append(dict(m))
    return out


def summary_messages(prompt: Sequence[dict], summary: str) -> list[dict]:
    """What a compacted episode continues from: its prompt (system, examples, task) and the summary."""
    return [*prompt, {"role": "user", "content": SUMMARY_PREFIX + summary.strip()}]


STRATEGIES = ("none", *CONTEXT_STRATEGIES.names(), "compact")


def _assistant(fmt, text: str) -> dict:
    """The action as the message the format renders back: its own reading where it has one, else the
    text as written (tool-call markup included), without the end-of-turn marker."""
    if hasattr(fmt, "action_message"):
        return fmt.action_message(text)
    return {"role": "assistant", "content": text.removesuffix(fmt.end_of_turn)}


def _encode(tokenizer, fmt, messages: Sequence[dict], tools) -> list[int]:
    return tokenizer.encode(bos_text(fmt, tokenizer) + fmt.render_prompt(list(messages), tools), add_special_tokens=False)


def fit_context(ep, sample, observation: Sequence[dict], obs_ids, tokenizer, budget):
    """The ids to feed after this action: `obs_ids` while the context has room for them and one more
    action, else a new context from the conversation as the budget's strategy rewrites it (for
    `compact`: the whole conversation and the request for a summary, which the next action writes)."""
    from agentic_rl.engines.base import Restart

    policy, fmt, tools = budget.context, ep.env.format, ep.env.tool_schemas
    ep.history += [_assistant(fmt, sample.text), *observation]
    room = ep.context_len + len(obs_ids) + budget.max_new_tokens
    if isinstance(obs_ids, Restart) or room <= policy.budget_tokens:
        return obs_ids
    if policy.strategy == "compact":
        ep.compacting = True
        return Restart(_encode(tokenizer, fmt, [*ep.prompt, *ep.history, {"role": "user", "content": SUMMARY_REQUEST}],
                               tools))
    history = CONTEXT_STRATEGIES.get(policy.strategy)(ep.history, policy)
    ids = _encode(tokenizer, fmt, [*ep.prompt, *history], tools)
    if len(ids) + budget.max_new_tokens > policy.budget_tokens and policy.strategy != "drop_observations":
        history = drop_observations(history, policy)  # cut was not enough: drop them
        ids = _encode(tokenizer, fmt, [*ep.prompt, *history], tools)
    ep.history = history
    _rendered(ep, [*ep.prompt, *history], tokenizer)
    return Restart(ids)


def compacted(ep, sample, tokenizer, budget):
    """The summary just written becomes the episode's new context (after the prompt), recorded as a
    turn of its own; None when the episode has no turn or token left for another action."""
    from agentic_rl.engines.base import Restart
    from agentic_rl.types import Turn

    fmt = ep.env.format
    summary = sample.text.removesuffix(fmt.end_of_turn)
    ep.turns.append(Turn(restart=ep.restart, obs_ids=tuple(ep.fed), action_ids=sample.ids, logprobs=sample.logprobs,
                         action_text=sample.text, stop_reason=sample.stop_reason, observation=""))
    ep.compacting = False
    if len(ep.turns) >= budget.max_turns or ep.generated >= budget.max_episode_tokens:
        ep.truncated = True
        return None
    messages = summary_messages(ep.prompt, summary)
    ep.history = messages[len(ep.prompt):]
    _rendered(ep, messages, tokenizer)
    return Restart(_encode(tokenizer, fmt, messages, ep.env.tool_schemas))


def _rendered(ep, messages: Sequence[dict], tokenizer) -> None:
    """A format whose template rewrites history follows its conversation from the new context on."""
    from agentic_rl.rollout.loop import history_of  # the loop imports this module

    if history_of(ep.env.format) == "template":
        ep.messages = list(messages)
        ep.text = bos_text(ep.env.format, tokenizer) + ep.env.format.render_prompt(ep.messages, ep.env.tool_schemas)
