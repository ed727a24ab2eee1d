"""A checkpoint trained in a tool-call format chats in it through our server (`engines/server.py`),
driven by the `openai` package: for every registered format with a chat template, a checkpoint
directory as a run saves it (the tiny model, the tokenizer carrying the format's template) is loaded
and served; the server finds the format from the template, a completion holding a call comes back as
structured `tool_calls`, the follow-up's prompt is Hugging Face's `apply_chat_template` of the whole
conversation, and the recorded episode is token for token the rollout's (the token contract).

The completions are scripted (a random tiny model writes no call): the engine under the server
replays the actions the rollout's scripted policy writes, the call with text past where a real
engine stops (the server must cut it at the format's stop strings, as the rollout does).
"""

from __future__ import annotations

import copy
import json

import openai
import pytest
from starlette.testclient import TestClient

from agentic_rl.engines.base import SamplingParams
from agentic_rl.engines.recorder import Recorder
from agentic_rl.engines.scripted import ScriptedEngine
from agentic_rl.engines.server import create_app
from agentic_rl.envs.base import ToolEnv
from agentic_rl.envs.formats import call_action, format_of_template, get_format
from agentic_rl.envs.formats.chat_template import to_openai_message
from agentic_rl.models.checkpoint import save_checkpoint
from agentic_rl.models.loader import load_model
from agentic_rl.rollout.loop import Budget, history_of, rollout
from agentic_rl.tools import calculator
from agentic_rl.types import Task

TEMPLATED = ["openai", "openai_reasoning", "qwen2_5", "qwen3", "llama3_json", "mistral", "gemma3"]
TASK = Task(id="t", prompt="What is 6*7?", answer=42)


def _actions(fmt) -> list[str]:
    call = call_action(fmt, "calculator", expression="6*7") + getattr(fmt, "call_end", "")
    return [call + " and then some text past the call", "<answer>42</answer>" + fmt.end_of_turn]


def _checkpoint(tiny, tokenizer, fmt, path):
    """A checkpoint as a run in `fmt` saves it (`trainer.loop.speak_the_format`), loaded back."""
    trained = copy.deepcopy(tokenizer)
    trained.chat_template = fmt.template
    return load_model(str(save_checkpoint(tiny, trained, path)))


@pytest.mark.parametrize("name", TEMPLATED)
def test_a_checkpoint_chats_in_its_format_through_the_openai_client(name, tiny, tokenizer, tmp_path):
    fmt = get_format(name)
    model, tok = _checkpoint(tiny, tokenizer, fmt, tmp_path / "ckpt")
    assert format_of_template(tok.chat_template) is fmt
    env = ToolEnv([calculator], "Use the calculator.", format=fmt)
    params = SamplingParams(1.0, 1.0, 64, fmt.stop_strings)
    (group,), _ = rollout(ScriptedEngine(tok, lambda row, turn: _actions(fmt)[turn]), lambda: env, [TASK], 1,
                          params, Budget(4, 64, 256))
    traj = group.trajectories[0]  # what training would train on

    actions, recorder = _actions(fmt), Recorder(tok, {tok.eos_token_id}, history_of(fmt), end_of_turn=fmt.end_of_turn)
    engine = ScriptedEngine(tok, lambda row, turn: actions[min(len(recorder.episode("e").calls), 1)])
    engine.model = model  # the checkpoint's context limit
    http = TestClient(create_app(engine, tok, recorder=recorder))
    client = openai.OpenAI(base_url="http://testserver/episodes/e/v1", api_key="none", http_client=http)
    messages = ToolEnv([calculator], "Use the calculator.", format=fmt).reset(TASK)
    first = client.chat.completions.create(model="m", messages=messages, tools=env.tool_schemas, max_tokens=64)
    reply = first.choices[0]
    # no prose; Qwen3's template writes an empty reasoning block, which stays content (no reasoning parser)
    assert reply.finish_reason == "tool_calls" and (reply.message.content or "").strip() in ("", "<think>\n\n</think>")
    assert [(c.function.name, json.loads(c.function.arguments)) for c in reply.message.tool_calls] == \
        [("calculator", {"expression": "6*7"})]
    results = ToolEnv([calculator], "", format=fmt).step(traj.turns[0].action_text).observation
    messages = [*messages, reply.message.model_dump(exclude_none=True),
                *({**m, "tool_call_id": reply.message.tool_calls[0].id} for m in results)]
    second = client.chat.completions.create(model="m", messages=messages, tools=env.tool_schemas, max_tokens=64)
    assert second.choices[0].message.content == "<answer>42</answer>" and not second.choices[0].message.tool_calls

    # the follow-up's prompt, served plainly: Hugging Face's rendering with the checkpoint's template
    plain = openai.OpenAI(base_url="http://testserver/v1", api_key="none", http_client=http)
    again = plain.chat.completions.create(model="m", messages=messages, tools=env.tool_schemas, max_tokens=64,
                                          extra_body={"return_token_ids": True})
    hf = tok.apply_chat_template([to_openai_message(m, fmt.json_arguments) for m in messages], tools=env.tool_schemas,
                                 add_generation_prompt=True, tokenize=True)["input_ids"]
    assert again.choices[0].model_extra["prompt_token_ids"] == hf
    # the episode the server recorded is the rollout's, context by context
    rows = http.get("/episodes/e").json()["rows"]
    assert [r["token_ids"] for r in rows] == [list(t.token_ids()) for t in traj.contexts()]
    assert [r["loss_mask"] for r in rows] == [list(t.loss_mask()) for t in traj.contexts()]
