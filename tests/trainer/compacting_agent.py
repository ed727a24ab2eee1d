"""An agent that compacts its own history, as long-horizon harnesses do: it works for `CALLS` model
calls, and every `EVERY` calls asks the model to summarize its progress, then starts over from the
system prompt, the task and that summary (`messages` replaced, not extended). The tiny model's
replies are noise; what matters is the shape: one long episode, several contexts, each summary a
reply the policy wrote. Each episode's replies are kept in `REPLIES` (by episode id) for the test."""

from __future__ import annotations

from openai import OpenAI

CALLS, EVERY = 24, 6
REPLIES: dict[str, list[str]] = {}
SYSTEM = "You are a careful agent. Work step by step."


def run(task: dict, base_url: str) -> float:
    client = OpenAI(base_url=base_url, api_key="unused", max_retries=0)
    episode = base_url.split("/episodes/")[1].split("/")[0]
    replies = REPLIES.setdefault(episode, [])
    start = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": task["prompt"]}]
    messages = list(start)
    for k in range(1, CALLS + 1):
        compacting = k % EVERY == 0
        if compacting:
            messages.append({"role": "user", "content": "Summarize your progress so far in one line."})
        reply = client.chat.completions.create(model="policy", messages=messages)
        text = reply.choices[0].message.content or ""
        replies.append(text)
        if compacting:  # a new context: the system prompt, the task, the summary
            messages = [*start, {"role": "user", "content": f"Your summary of the work so far: {text}"}]
        else:
            messages += [{"role": "assistant", "content": text}, {"role": "user", "content": "Go on."}]
    return float(len(replies[0]) % 2)  # some spread in a group
