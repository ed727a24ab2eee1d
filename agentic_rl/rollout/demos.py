"""Demonstrations as trajectories: the same token layout the rollout produces, so SFT trains on
exactly what the policy will later sample (actions) and read (prompt, glue, tool results)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from agentic_rl.envs.base import Env
from agentic_rl.types import Task, Trajectory, Turn


def demonstrate(spec, options: Mapping, task: Task, tokenizer) -> tuple[list[dict], Trajectory]:
    """The env's own demonstration for `task` (messages) and its trajectory, made on a fresh env
    instance so that a stateful tool (a sandboxed interpreter) starts clean, and closed after."""
    env = spec.make_env(options)
    try:
        demo = spec.demonstration(task, env)
        return demo, demonstration_trajectory(task, env, demo, tokenizer)
    finally:
        close = getattr(env, "close", None)
        if close is not None:
            close()


def demonstration_trajectory(task: Task, env: Env, demo: Sequence[Mapping], tokenizer) -> Trajectory:
    """demo: the messages after the user turn (assistant actions and tool results, in order).

    A tool-calling action ends at </tool_call>, where generation stops; the engine never samples the
    <|im_end|> after it, so that token is glue (masked). A final action ends with <|im_end|>, which the
    policy must learn to emit, so it is part of the action (trained).
    """
    fmt = env.format
    fed = tokenizer.encode(fmt.render_prompt(env.reset(task), env.tool_schemas), add_special_tokens=False)
    turns: list[Turn] = []
    i = 0
    while i < len(demo):
        msg = demo[i]
        if msg["role"] != "assistant":
            raise ValueError(f"demonstration message {i} should be an assistant action, got {msg['role']}")
        body = fmt.render_assistant_body(msg)
        calls = fmt.parse(body).attempted  # the protocol decides what a call looks like
        text = body + ("" if calls else fmt.end_of_turn)
        ids = tuple(tokenizer.encode(text, add_special_tokens=False))
        j = i + 1
        while j < len(demo) and demo[j]["role"] == "tool":
            j += 1
        observation = demo[i + 1 : j]
        turns.append(Turn(tuple(fed), ids, (0.0,) * len(ids), text, "stop" if calls else "eos",
                          observation="".join(m["content"] for m in observation)))
        if observation:
            fed = tokenizer.encode(fmt.render_observation(observation, action_closed=False), add_special_tokens=False)
        i = j
    return Trajectory(task=task, turns=tuple(turns), reward=1.0, terminated=True)
