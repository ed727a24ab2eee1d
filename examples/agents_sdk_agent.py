"""An OpenAI Agents SDK agent with a function tool, written as the SDK's own docs write one for a
model provider of your own; only the client's base URL points at the recording proxy.

Trained with `rollout.agent.program: examples/agents_sdk_agent.py:run` on a calculator env
(docs/proxy.md, Harnesses). `run(task, base_url)` runs the agent on the problem and returns None:
the env's verifier scores the last reply (`<answer>...</answer>`). `run` talks the Responses API
(`OpenAIResponsesModel`, `POST /v1/responses`), the SDK's default; `run_chat` the same agent
through chat completions (`OpenAIChatCompletionsModel`).
Tracing is off: it would upload each run to OpenAI.
"""

from __future__ import annotations

import asyncio

from agents import (
    Agent,
    MaxTurnsExceeded,
    OpenAIChatCompletionsModel,
    OpenAIResponsesModel,
    Runner,
    function_tool,
    set_tracing_disabled,
)
from openai import AsyncOpenAI

from agentic_rl.tools.calculator import calculator as evaluate  # the env's own calculator

INSTRUCTIONS = ("You solve arithmetic word problems. Call the calculator tool for the arithmetic, then give the "
                "final answer as a number inside <answer></answer> tags.")
MODELS = {"chat_completions": OpenAIChatCompletionsModel, "responses": OpenAIResponsesModel}
MAX_TURNS = 4

set_tracing_disabled(disabled=True)


@function_tool
def calculator(expression: str) -> str:
    """Evaluate an arithmetic expression with + - * / and parentheses.

    Args:
        expression: the expression, e.g. (12 + 30) / 7.
    """
    return evaluate(expression)


async def solve(problem: str, base_url: str, api: str) -> str | None:
    client = AsyncOpenAI(base_url=base_url, api_key="unused", max_retries=0)
    agent = Agent(name="Calculator", instructions=INSTRUCTIONS, tools=[calculator],
                  model=MODELS[api](model="policy", openai_client=client))
    try:
        result = await Runner.run(agent, problem, max_turns=MAX_TURNS)
    except MaxTurnsExceeded:
        return None  # out of turns: the verifier scores the last reply
    finally:
        await client.close()
    return result.final_output


def run(task: dict, base_url: str) -> None:
    """The SDK's default model: the Responses API."""
    asyncio.run(solve(task["prompt"], base_url, "responses"))  # a thread of its own per episode, so a loop of its own


def run_chat(task: dict, base_url: str) -> None:
    """The same agent through chat completions."""
    asyncio.run(solve(task["prompt"], base_url, "chat_completions"))
