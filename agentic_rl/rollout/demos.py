"""Demonstrations as trajectories: the same token layout the rollout produces, so SFT trains on
exactly what the policy will later sample (actions) and read (prompt, glue, tool results)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from agentic_rl.envs.base import Env, close_env
from agentic_rl.envs.formats import bos_text
from agentic_rl.types import Task, Trajectory, Turn


def demonstrate(spec, options: Mapping, task: Task, tokenizer) -> tuple[list[dict], Trajectory]:
    """The env's own demonstration for `task` (messages) and its trajectory, made on a fresh env
    instance so that a stateful tool (a sandboxed interpreter) starts clean, and closed after."""
    env = spec.make_env(options)
    try:
        demo = spec.demonstration(task, env)
        return demo, demonstration_trajectory(task, env, demo, tokenizer)
    finally:
        close_env(env)


def demonstration_trajectory(task: Task, env: Env, demo: Sequence[Mapping], tokenizer) -> Trajectory:
    """demo: the messages after the user turn (assistant actions and tool results, in order)."""
    return conversation_trajectory(task, [*env.reset(task), *demo], env.tool_schemas, env.format, tokenizer)


def conversation_trajectory(task: Task, messages: Sequence[Mapping], tools: Sequence[Mapping], fmt,
                            tokenizer) -> Trajectory:
    """Any conversation (OpenAI-style messages: system, user, assistant with `tool_calls`, tool) as a
    trajectory in the rollout's token layout: every assistant message is an action, everything
    between two actions (tool results, template glue, a new user turn) is an observation.

    A tool-calling action ends at its closing tag, where generation stops; the engine never samples
    the end-of-turn after it, so that token is glue (masked). A call with no closing tag of its own
    (Llama's JSON, Mistral's [TOOL_CALLS]) ends with the format's `call_end`, its end-of-turn marker,
    which the policy writes (trained). A final action ends with the end-of-turn token, which the
    policy must learn to emit, so it is part of the action (trained). The glue is
    cut out of full renders of the conversation, so the format must be prefix-preserving (checked).
    An assistant message with `"weight": 0` (OpenAI's fine-tuning convention) stays in the sequence
    but out of the loss.
    """
    turns: list[Turn] = []
    fed = ""
    last = max((i for i, m in enumerate(messages) if m["role"] == "assistant"), default=-1)
    if last < 0:
        raise ValueError("the conversation has no assistant message to train on")
    for i, msg in enumerate(messages[: last + 1]):
        if msg["role"] != "assistant":
            continue
        before = bos_text(fmt, tokenizer) + fmt.render_prompt(messages[:i], tools)
        # a template that rewrites history (`history: template`, Qwen3's reasoning) starts a new
        # context where its rendering does not extend the one before, as the rollout does
        restart = not before.startswith(fed)
        if restart and getattr(fmt, "history", "keep") != "template":
            raise ValueError(f"format {fmt.name} does not render message {i} as a continuation of the ones before")
        body = fmt.render_assistant_body(msg)
        calls = fmt.parse(body).attempted  # the protocol decides what a call looks like
        text = body + (getattr(fmt, "call_end", "") if calls else fmt.end_of_turn)
        ids = tuple(tokenizer.encode(text, add_special_tokens=False))
        turns.append(Turn(tuple(tokenizer.encode(before if restart else before[len(fed):], add_special_tokens=False)),
                          ids, (0.0,) * len(ids), text, "stop" if calls else "eos",
                          observation=_observation(messages, i), trained=msg.get("weight", 1) != 0, restart=restart))
        fed = before + text
    return Trajectory(task=task, turns=tuple(turns), reward=1.0, terminated=True)


def _observation(messages: Sequence[Mapping], i: int) -> str:
    """The tool results that answer the action at index i."""
    out = []
    for m in messages[i + 1 :]:
        if m["role"] != "tool":
            break
        out.append(m["content"])
    return "".join(out)
