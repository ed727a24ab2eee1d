"""First-order action synthesis (AgentFounder, Su et al. 2025): planning and reasoning text from a
pool of tasks, with no agent loop run during synthesis.

Two kinds of item, both next-token training text for `cpt:`:

- a **planning action**: the task, the analyses of how to approach it, and the first tool call;
- a **reasoning action**: the task, the knowledge it needs (as snippets), and the whole chain of
  reasoning to the answer.

Sources (`FAS_SOURCES`): `demonstration`, the env's own programmatic solution (its analyses, its
calls, and the tool results it replays as knowledge: exact and instant), and `engine`, a model that
writes several analyses and a first call for each task, sampled in one batch (any model the loader
reads: the policy's start, a larger local one).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from agentic_rl.envs.spec import EnvSpec
from agentic_rl.registry import Registry
from agentic_rl.types import Task

FAS_SOURCES: Registry[Callable[..., list[str]]] = Registry("fas source")


def _call_text(call: dict) -> str:
    fn = call.get("function", call)
    args = fn.get("arguments", {})
    args = json.loads(args) if isinstance(args, str) else args
    return f"{fn['name']}({', '.join(f'{k}={v!r}' for k, v in args.items())})"


def demonstration_items(task: Task, messages: Sequence[dict]) -> list[str]:
    """The planning and the reasoning item of one demonstrated task."""
    steps = [m for m in messages if m["role"] == "assistant"]
    calls = [c for m in steps for c in m.get("tool_calls", ())]
    knowledge = [m["content"] for m in messages if m["role"] == "tool"]
    thoughts = [m["content"].strip() for m in steps if m.get("content", "").strip()]
    items = []
    if calls:
        analysis = thoughts[0] if thoughts else "Work it out with the tools."
        items.append(f"Task: {task.prompt}\nAnalysis: {analysis}\nFirst tool call: {_call_text(calls[0])}")
    snippets = "\n".join(f"- {k}" for k in knowledge) or "- (none needed)"
    reasoning = "\n".join(thoughts) or "Combine the facts above."
    items.append(f"Task: {task.prompt}\nKnowledge:\n{snippets}\nReasoning:\n{reasoning}\nAnswer: {task.answer}")
    return items


@FAS_SOURCES.register("demonstration")
def from_demonstrations(spec: EnvSpec, options: dict[str, Any], tasks: Sequence[Task], **_) -> list[str]:
    if spec.demonstration is None:
        raise ValueError(f"env {spec.name!r} has no demonstrations: use the engine source")
    out = []
    for task in tasks:
        env = spec.make_env(options)
        try:
            out += demonstration_items(task, spec.demonstration(task, env))
        finally:
            close = getattr(env, "close", None)
            if close:
                close()
    return out


PLAN_PROMPT = ("Here is a task for an agent with tools ({tools}).\nTask: {task}\n"
               "Write two short, different analyses of how to solve it, then the first tool call to make.")


@FAS_SOURCES.register("engine")
def from_engine(spec: EnvSpec, options: dict[str, Any], tasks: Sequence[Task], model: str = "smollm2",
                samples: int = 2, max_new_tokens: int = 160, seed: int = 1, **_) -> list[str]:
    """`samples` planning texts per task, written by `model` at temperature 0.8, all tasks in one batch."""
    from agentic_rl.engines.base import SamplingParams
    from agentic_rl.engines.hf import HFEngine
    from agentic_rl.models.loader import load_model

    policy, tokenizer = load_model(model)
    engine = HFEngine(policy, tokenizer, "auto")
    env = spec.make_env(options)
    tools = ", ".join(s["function"]["name"] for s in getattr(env, "tool_schemas", ())) or "none"
    rows = {}
    for i, task in enumerate(t for t in tasks for _ in range(samples)):
        messages = [{"role": "user", "content": PLAN_PROMPT.format(tools=tools, task=task.prompt)}]
        ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
        rows[i] = list(ids["input_ids"] if isinstance(ids, Mapping) else ids)
    texts = [""] * len(rows)

    def on_stop(row, sample):
        texts[row] = sample.text

    engine.session(seed).run(rows, SamplingParams(0.8, 1.0, max_new_tokens), on_stop)
    flat = [t for t in tasks for _ in range(samples)]
    return [f"Task: {task.prompt}\nPlan:\n{text.strip()}" for task, text in zip(flat, texts) if text.strip()]


def synthesize(spec: EnvSpec, options: dict[str, Any], n: int, seed: int, source: str = "demonstration",
               split: str = "train", **kwargs) -> list[str]:
    """FAS items for `n` tasks of the env's `split` from `source`."""
    return FAS_SOURCES.get(source)(spec, options, spec.tasks(split, n, seed), seed=seed, **kwargs)
