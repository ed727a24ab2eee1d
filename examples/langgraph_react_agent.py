"""A LangGraph ReAct agent with a calculator tool, written as LangGraph's own docs write one; only
the model's base URL points at the recording proxy.

Trained with `rollout.agent.program: examples/langgraph_react_agent.py:run` on a calculator env
(docs/proxy.md, Harnesses). `run(task, base_url)` builds the prebuilt ReAct graph over `ChatOpenAI`
with the calculator bound as its tool, lets it run until the model stops calling the tool, and
returns None: the env's verifier scores the last reply (`<answer>...</answer>`).

LangGraph 1.x marks `create_react_agent` as moved to `langchain.agents.create_agent` (the same loop,
in the `langchain` package); the prebuilt one needs only `langgraph`.
"""

from __future__ import annotations

from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.errors import GraphRecursionError
from langgraph.prebuilt import create_react_agent

from agentic_rl.tools.calculator import calculator as evaluate  # the env's own calculator

SYSTEM = ("You solve arithmetic word problems. Call the calculator tool for the arithmetic, then give the "
          "final answer as a number inside <answer></answer> tags.")
MAX_MODEL_CALLS = 4


@tool
def calculator(expression: str) -> str:
    """Evaluate an arithmetic expression with + - * / and parentheses."""
    return evaluate(expression)


def run(task: dict, base_url: str) -> None:
    model = ChatOpenAI(model="policy", base_url=base_url, api_key="unused", max_retries=0)
    agent = create_react_agent(model, [calculator], prompt=SYSTEM)
    try:  # each model call and each tool round is one step of the graph
        agent.invoke({"messages": [{"role": "user", "content": task["prompt"]}]},
                     {"recursion_limit": 2 * MAX_MODEL_CALLS})
    except GraphRecursionError:
        pass  # out of steps: the verifier scores the last reply
