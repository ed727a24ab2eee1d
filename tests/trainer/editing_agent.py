"""An agent that edits its own history in one episode of a step (the first of the first task): it asks
twice, and the first reply it sends back has words put in front, so the second call's prompt does not
extend the first call's prompt and reply. Its reward is the parity of the first reply's token ids, as in
`scored_agent.py`, so groups have spread on a random tiny model."""

from __future__ import annotations

from openai import OpenAI

from tests.trainer.scored_agent import post_parity_reward


def run(task: dict, base_url: str) -> None:
    client = OpenAI(base_url=base_url, api_key="unused", max_retries=0)
    messages = [{"role": "user", "content": task["prompt"]}]
    for k in range(2):
        reply = client.chat.completions.create(model="policy", messages=messages)
        message = reply.choices[0].message.model_dump(exclude_none=True)
        if k == 0 and base_url.split("/episodes/")[1].split("/")[0].endswith("-t0-g0"):
            message["content"] = "(edited by the agent) " + (message.get("content") or "")
        messages += [message, {"role": "user", "content": "Once more?"}]
    post_parity_reward(base_url)
