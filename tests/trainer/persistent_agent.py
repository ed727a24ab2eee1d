"""An agent that never ends an episode by itself: it asks the model again and again, each reply sent
back as it came with a user nudge after it, up to 12 calls, so only the proxy's budget stops it.
`run` lets the proxy's refusal raise out of it (`openai.BadRequestError`); `run_scored` catches it and
posts the parity reward of `scored_agent.py`."""

from __future__ import annotations

from openai import BadRequestError, OpenAI

from tests.trainer.scored_agent import post_parity_reward


def run(task: dict, base_url: str) -> None:
    client = OpenAI(base_url=base_url, api_key="unused", max_retries=0)
    messages = [{"role": "user", "content": task["prompt"]}]
    for _ in range(12):
        reply = client.chat.completions.create(model="policy", messages=messages)
        messages += [reply.choices[0].message.model_dump(exclude_none=True), {"role": "user", "content": "Go on."}]


def run_scored(task: dict, base_url: str) -> None:
    try:
        run(task, base_url)
    except BadRequestError:  # the budget is spent: the episode is over
        pass
    post_parity_reward(base_url)
