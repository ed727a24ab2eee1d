"""The OpenAI Agents SDK (`openai-agents`) runs an agent with a function tool through our server, by
the Responses API (`OpenAIResponsesModel`, the SDK's default) and by chat completions
(`OpenAIChatCompletionsModel`), each run whole (`Runner.run`) and streamed (`Runner.run_streamed`).

The scripted engine writes the call and then the answer (a random model writes no call), so the
tool runs and its result goes back through the SDK's own items; recorded, each episode is one row
whose trained tokens are the two replies as sampled. Then the same agent on the tiny model, whose
replies are noise: the run ends without an exception, its items parse.
"""

from __future__ import annotations

import asyncio

import pytest

from agentic_rl.engines.hf import HFEngine
from agentic_rl.engines.recorder import Recorder
from agentic_rl.engines.scripted import ScriptedEngine
from agentic_rl.engines.server import create_app
from tests.engines.test_served import Server

agents = pytest.importorskip("agents")

REPLIES = ['Let me compute.\n<tool_call>\n{"name": "calculator", "arguments": {"expression": "6*7"}}\n</tool_call>',
           "It is 42.<|im_end|>"]


@agents.function_tool
def calculator(expression: str) -> str:
    """Evaluate an arithmetic expression."""
    return {"6*7": "42"}.get(expression, "unknown")  # the one expression the script asks


def _agent(url: str, api: str, max_tokens: int):
    client = agents.AsyncOpenAI(base_url=url, api_key="unused", max_retries=0, timeout=30)
    model = (agents.OpenAIResponsesModel if api == "responses" else agents.OpenAIChatCompletionsModel)("m", client)
    return agents.Agent(name="calc", instructions="Use the calculator.", tools=[calculator], model=model,
                        model_settings=agents.ModelSettings(max_tokens=max_tokens))


async def _run(agent, streamed: bool):
    if not streamed:
        return await agents.Runner.run(agent, "What is 6*7?", max_turns=3)
    result = agents.Runner.run_streamed(agent, "What is 6*7?", max_turns=3)
    async for _ in result.stream_events():
        pass
    return result


@pytest.mark.parametrize("streamed", [False, True], ids=["run", "run_streamed"])
@pytest.mark.parametrize("api", ["responses", "chat"])
def test_an_agents_sdk_agent_calls_its_tool_through_the_proxy(api, streamed, tokenizer):
    agents.set_tracing_disabled(True)
    replies = list(REPLIES)
    engine = ScriptedEngine(tokenizer, lambda row, turn: replies.pop(0))
    server = Server(create_app(engine, tokenizer, recorder=Recorder(tokenizer, engine.eos_ids)))
    try:
        import httpx

        result = asyncio.run(_run(_agent(server.url + "/episodes/e/v1", api, 64), streamed))
        assert result.final_output == "It is 42."
        outputs = [i.output for i in result.new_items if i.type == "tool_call_output_item"]
        assert outputs == ["42"]
        (row,) = httpx.get(server.url + "/episodes/e").json()["rows"]  # the SDK sent the history back unedited
        trained = [t for t, m in zip(row["token_ids"], row["loss_mask"]) if m]
        assert trained == [t for r in REPLIES for t in tokenizer.encode(r, add_special_tokens=False)]
    finally:
        server.stop()


@pytest.mark.slow  # the scripted test above holds the protocol; this one the tiny model's replies
@pytest.mark.parametrize("api", ["responses", "chat"])
def test_an_agents_sdk_agent_runs_on_the_tiny_model(api, tiny, tokenizer):
    """Every reply of the tiny model runs to max_tokens. A streamed Responses run then ends in
    `response.incomplete`, which the SDK raises as a ModelBehaviorError naming max_output_tokens,
    as it does against OpenAI; every other run ends with the noise as its final output."""
    agents.set_tracing_disabled(True)
    server = Server(create_app(HFEngine(tiny, tokenizer, "fp32"), tokenizer))
    try:
        for streamed in (False, True):
            if streamed and api == "responses":
                with pytest.raises(agents.exceptions.ModelBehaviorError, match="max_output_tokens"):
                    asyncio.run(_run(_agent(server.url + "/v1", api, 6), streamed))
                continue
            result = asyncio.run(_run(_agent(server.url + "/v1", api, 6), streamed))
            assert isinstance(result.final_output, str) and result.new_items
    finally:
        server.stop()
