"""Each family's format (qwen2_5, qwen3, llama3_json, mistral, gemma3): prefix-preserving renders (Qwen3's
rewrites, as its published template does), parsers that accept what vLLM's parser for the family
accepts and never raise, and the token contract on SmolLM2's tokenizer, where the Llama, Mistral and
Gemma end-of-turn markers are no single token."""

from __future__ import annotations

import copy
import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentic_rl.engines.base import SamplingParams
from agentic_rl.engines.scripted import ScriptedEngine
from agentic_rl.envs.base import ToolEnv
from agentic_rl.envs.formats import GEMMA3, LLAMA3_JSON, MISTRAL, QWEN2_5, QWEN3, get_format
from agentic_rl.rollout.conformance import check_env
from agentic_rl.rollout.loop import Budget, rollout
from agentic_rl.tools import calculator, function_schema
from agentic_rl.types import Task, ToolCall

FAMILIES = [LLAMA3_JSON, MISTRAL, GEMMA3]
CALL = {"type": "function", "function": {"name": "calculator", "arguments": {"expression": "2 + 3 * 4"}}}
CONVERSATION = [
    {"role": "system", "content": "Be careful."},
    {"role": "user", "content": "What is 2 + 3 * 4?"},
    {"role": "assistant", "content": "I will use the calculator.", "tool_calls": [CALL]},
    {"role": "tool", "name": "calculator", "content": "14"},
    {"role": "assistant", "content": "<answer>14</answer>"},
    {"role": "user", "content": "And 1 + 1, twice?"},
    {"role": "assistant", "content": "", "tool_calls": [CALL, CALL]},
    {"role": "tool", "name": "calculator", "content": "14"},
    {"role": "tool", "name": "calculator", "content": "14"},
]


@pytest.mark.parametrize("fmt", [QWEN2_5, *FAMILIES], ids=lambda f: f.name)
def test_prompt_plus_each_action_plus_glue_equals_full_render(fmt):
    """What the rollout concatenates (prompt, each action as the policy writes it, glue) is what a
    full render shows, at every action of a two-user-turn conversation with parallel calls."""
    tools = [function_schema(calculator)]
    text = fmt.render_prompt(CONVERSATION[:2], tools)
    for i, message in enumerate(CONVERSATION[2:], start=2):
        if message["role"] != "assistant":
            continue
        action = fmt.render_assistant_body(message) + (fmt.call_end if message.get("tool_calls") else fmt.end_of_turn)
        results = [m for m in CONVERSATION[i + 1:] if m["role"] == "tool"][: len(message.get("tool_calls", []))]
        following = CONVERSATION[i + 1: i + 1 + len(results)] or CONVERSATION[i + 1: i + 2]
        text += action + fmt.render_observation(following, action_closed=action.endswith(fmt.end_of_turn))
        assert text == fmt.render_prompt(CONVERSATION[: i + 1 + len(following)], tools), (fmt.name, i)
        parsed = fmt.parse(action)
        assert [c.name for c in parsed.tool_calls] == ["calculator"] * len(message.get("tool_calls", []))
        assert fmt.action_message(action)["content"] == message["content"]


PARSES = [  # (format, text, calls, an error containing)
    (LLAMA3_JSON, '{"name": "calculator", "parameters": {"expression": "1+2"}}<|eot_id|>', [("calculator", {"expression": "1+2"})], None),
    (LLAMA3_JSON, '<|python_tag|>{"name": "f", "arguments": {"a": 1}}; {"name": "g", "parameters": {}}<|eom_id|>',
     [("f", {"a": 1}), ("g", {})], None),
    (LLAMA3_JSON, '<|python_tag|>brave_search.call(query="vorel founder")<|eom_id|>', [("brave_search", {"query": "vorel founder"})], None),
    (LLAMA3_JSON, '{"name": "f", "parameters": {}, "arguments": {}}', [], "both"),
    (LLAMA3_JSON, '{"name": "f", "parameters": {"a": 7 * 6}}', [], "not valid JSON"),
    (LLAMA3_JSON, "<answer>3</answer><|eot_id|>", [], ""),
    (MISTRAL, '[TOOL_CALLS] [{"name": "f", "arguments": {"a": 1}}, {"name": "g", "arguments": "{}"}]</s>', [("f", {"a": 1}), ("g", {})], None),
    (MISTRAL, '[TOOL_CALLS]{"name": "f", "arguments": {}}', [("f", {})], None),
    (MISTRAL, "[TOOL_CALLS] []</s>", [], "empty"),
    (MISTRAL, '[TOOL_CALLS] [{"name": "f", "arguments": ', [], "not valid JSON"),
    (MISTRAL, "<answer>3</answer></s>", [], ""),
    (GEMMA3, '```tool_code\ncalculator(expression="1+2")\nf(a=[1, 2], b=true, c=None)\n```<end_of_turn>',
     [("calculator", {"expression": "1+2"}), ("f", {"a": [1, 2], "b": True, "c": None})], None),
    (GEMMA3, '[calculator(expression="1+2"), f()]', [("calculator", {"expression": "1+2"}), ("f", {})], None),
    (GEMMA3, '```tool_code\ncalculator(expression="1+2")', [], "not closed"),
    (GEMMA3, "```tool_code\ncalculator(1 + 2)\n```", [], "keyword arguments"),
    (GEMMA3, "```tool_code\ncalculator(expression=x)\n```", [], "literals"),
    (GEMMA3, "```tool_code\nimport os\n```", [], "Python call"),
    (GEMMA3, "```tool_code\ncalculator(expression='1'\n```", [], "not valid Python"),
    (GEMMA3, "The answer is [3] (see above)<end_of_turn>", [], ""),
]


@pytest.mark.parametrize(("fmt", "text", "calls", "error"), PARSES)
def test_parse_cases(fmt, text, calls, error):
    parsed = fmt.parse(text)
    assert [(c.name, dict(c.arguments)) for c in parsed.tool_calls] == calls
    if error is None:
        assert parsed.attempted and not parsed.errors
    elif error == "":
        assert parsed.is_final and not parsed.errors
    else:
        assert parsed.attempted and error in parsed.errors[0], parsed.errors


@pytest.mark.parametrize("fmt", FAMILIES, ids=lambda f: f.name)
@settings(max_examples=150, deadline=None)
@given(text=st.lists(st.sampled_from(list('{}[]()"=,;:\n ab1') + ["<|python_tag|>", "[TOOL_CALLS]", "```tool_code\n", "```",
                                                                  '"name"', "f(", "<|eot_id|>"]), max_size=40).map("".join))
def test_parser_never_raises(fmt, text):
    parsed = fmt.parse(text)
    assert all(isinstance(c, ToolCall) for c in parsed.tool_calls) and all(isinstance(e, str) for e in parsed.errors)


@pytest.mark.parametrize("name", ["qwen2_5", "qwen3", "llama3_json", "mistral", "gemma3"])
def test_calculator_passes_every_check_on_smollm2(tokenizer, name):
    checks = check_env("calculator", tokenizer, {"format": name})
    assert [c for c in checks if not c.passed] == [] and len(checks) == 9


def test_an_end_of_turn_that_is_no_token_is_a_stop_string_and_is_never_fed_twice(tokenizer):
    """SmolLM2 has no <|eot_id|> token: the engine stops at the text. The glue after a call that
    ends with it must not repeat it: the context is the template's render of the conversation, and
    the trained tokens are exactly the sampled ones."""
    assert len(tokenizer.encode(LLAMA3_JSON.end_of_turn, add_special_tokens=False)) > 1
    env = ToolEnv([calculator], "Use the calculator.", format=get_format("llama3_json"))
    task = Task(id="t", prompt="What is 2 + 3 * 4?", answer=14)
    call = '{"name": "calculator", "parameters": {"expression": "2 + 3 * 4"}}<|eot_id|> never sampled'
    script = [call, "<answer>14</answer><|eot_id|>"]
    engine = ScriptedEngine(tokenizer, lambda row, turn: script[turn])
    params = SamplingParams(1.0, 1.0, 64, LLAMA3_JSON.stop_strings)
    (group,), _ = rollout(engine, lambda: env, [task], 1, params, Budget(4, 64, 256))
    traj = group.trajectories[0]
    assert [t.stop_reason for t in traj.turns] == ["stop", "stop"]
    conversation = [*env.reset(task), {"role": "assistant", "content": "", "tool_calls": [CALL]},
                    {"role": "tool", "name": "calculator", "content": "14"}]
    expected = tokenizer.bos_token + LLAMA3_JSON.render_prompt(conversation, env.tool_schemas) + script[1]
    assert tokenizer.decode(traj.token_ids(), skip_special_tokens=False) == expected
    sampled = [t for turn in traj.turns for t in turn.action_ids]
    assert [t for t, m in zip(traj.token_ids(), traj.loss_mask()) if m] == sampled


TEMPLATED = ["openai", "openai_reasoning", "qwen2_5", "qwen3", "llama3_json", "mistral", "gemma3"]


@pytest.mark.parametrize("bos", ["", "<|begin_of_text|>"], ids=["smollm2-bos", "own-bos"])
@pytest.mark.parametrize("name", TEMPLATED)
def test_the_rollouts_prompt_is_what_apply_chat_template_tokenizes(tokenizer, name, bos):
    """The ids the rollout feeds are transformers' `apply_chat_template(..., tokenize=True)` with the
    format's template: opening with the tokenizer's BOS where the template renders `bos_token` (Llama
    3, Mistral, Gemma; SmolLM2's BOS, or a family's own added as one special token), with nothing in
    front for ChatML (Qwen, ours)."""
    fmt = get_format(name)
    tok = copy.deepcopy(tokenizer)
    if bos:
        tok.add_special_tokens({"bos_token": bos})
    tok.chat_template = fmt.template
    env = ToolEnv([calculator], "Use the calculator.", format=fmt)
    task = Task(id="t", prompt="What is 2 + 3 * 4?", answer=14)
    engine = ScriptedEngine(tok, lambda row, turn: "<answer>14</answer>" + fmt.end_of_turn)
    (group,), _ = rollout(engine, lambda: env, [task], 1, SamplingParams(1.0, 1.0, 64, fmt.stop_strings),
                          Budget(2, 64, 128))
    expected = tok.apply_chat_template(env.reset(task), tools=env.tool_schemas, add_generation_prompt=True,
                                       tokenize=True)["input_ids"]
    assert list(group.trajectories[0].turns[0].obs_ids) == expected
    assert fmt.opens_with_bos == (name in ("llama3_json", "mistral", "gemma3"))
    # SmolLM2's BOS is <|im_start|>, which ChatML opens with anyway; a family's own is no ChatML text
    assert not bos or (expected[0] == tok.bos_token_id) == fmt.opens_with_bos


def test_qwen_templates_follow_the_published_layouts():
    """Qwen2.5: its own default system prompt, no blank line in front of a call without prose.
    Qwen3: no default system prompt; reasoning shown only after the latest real user message (a turn
    of tool responses does not count), kept when not empty and always on the last message."""
    tools = [function_schema(calculator)]
    qwen25 = QWEN2_5.render_prompt(CONVERSATION[1:], tools)
    assert qwen25.startswith("<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.\n\n# Tools")
    assert "<|im_start|>assistant\n<tool_call>\n" in qwen25 and "I will use the calculator.\n<tool_call>" in qwen25
    think = [{"role": "user", "content": "q"},
             {"role": "assistant", "content": "<think>\nold\n</think>\n\nA"},
             {"role": "user", "content": "q2"},
             {"role": "assistant", "content": "<think>plan</think>", "tool_calls": [CALL]},
             {"role": "tool", "name": "calculator", "content": "14"},
             {"role": "user", "content": "<tool_response>\n14\n</tool_response>"},
             {"role": "assistant", "content": "B"}]
    text = QWEN3._render(think, (), add_generation_prompt=False)
    assert text.startswith("<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\nA<|im_end|>")  # dropped
    assert "<|im_start|>assistant\n<think>\nplan\n</think>\n\n<tool_call>\n" in text  # kept, no blank line
    assert text.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\nB<|im_end|>\n")  # the last: always
    no_user = QWEN3._render([{"role": "system", "content": "s"}, {"role": "assistant", "content": "<think>r</think>A"}], (), False)
    assert no_user.endswith("<|im_start|>assistant\nA<|im_end|>\n")  # no real user message: no reasoning anywhere
    assert "\n\n# Tools" not in QWEN3.render_prompt(think[:1], tools) and QWEN3.render_prompt(think[:1], tools).startswith(
        "<|im_start|>system\n# Tools")


def test_a_demonstration_in_a_rewriting_template_starts_new_contexts_and_others_still_raise(tokenizer):
    """Qwen3 drops an empty reasoning block from history: the demonstration, like the rollout, starts
    a new context there. A format that keeps history and renders no continuation is an error."""
    from agentic_rl.rollout.demos import conversation_trajectory

    task = Task(id="t", prompt="What is 2 + 3 * 4?", answer=14)
    messages = [*CONVERSATION[1:4], {"role": "assistant", "content": "<answer>14</answer>"}]
    traj = conversation_trajectory(task, messages, [], QWEN3, tokenizer)
    assert [t.restart for t in traj.turns] == [False, True] and traj.restarts == 1
    assert tokenizer.decode(list(traj.turns[1].obs_ids), skip_special_tokens=False) == QWEN3.render_prompt(messages[:3])
    keep = dataclasses.replace(QWEN3, name="qwen3_keep", history="keep")
    with pytest.raises(ValueError, match="continuation"):
        conversation_trajectory(task, messages, [], keep, tokenizer)


@pytest.mark.parametrize("template", ["LLAMA3_JSON_TEMPLATE", "MISTRAL_TEMPLATE", "GEMMA3_TEMPLATE", "QWEN3_TEMPLATE"])
def test_a_models_own_tool_template_is_kept_and_one_without_tools_replaced(tokenizer, template):
    """The model's own template is the default when it renders tool calls and results, in its own
    syntax; a template that drops them (SmolLM2's shipped one) gets our ChatML."""
    import copy

    from agentic_rl.envs.formats import family_templates
    from agentic_rl.models.chat_template import TOOL_CHATML_TEMPLATE, install_chat_template

    own = copy.deepcopy(tokenizer)
    own.chat_template = getattr(family_templates, template)
    install_chat_template(own)
    assert own.chat_template == getattr(family_templates, template)
    bare = copy.deepcopy(tokenizer)
    bare.chat_template = "{% for m in messages %}{{ m['role'] + ': ' + (m['content'] or '') + '\\n' }}{% endfor %}"
    install_chat_template(bare)
    assert bare.chat_template == TOOL_CHATML_TEMPLATE


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("name", ["llama3_json", "mistral"])
def test_the_tiny_recipe_trains_end_to_end_in_a_family_format(tmp_path, name):
    """SFT on the demonstrations in the family's format, then two RL steps sampled by the real HF
    engine (stopping at the end-of-turn text, a stop string on SmolLM2), then the evaluation."""
    import json

    from agentic_rl.trainer import loop
    from agentic_rl.trainer.config import load_config

    cfg = load_config("recipes/tiny.yaml", [f"output_dir={tmp_path}", "eval.baselines=false", f"env.options.format={name}"])
    loop.train(cfg)
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows if r["stage"] == "rl"] == [1, 2]
    assert all(r["trained_tokens"] > 0 for r in rows if r["stage"] == "sft")
    episodes = [json.loads(line) for line in (tmp_path / "trajectories" / "rl.jsonl").read_text().splitlines()]
    fmt = get_format(name)
    env = ToolEnv([calculator], "x", format=fmt)
    for ep in episodes:
        first = ep["turns"][0]["obs_text"]
        prompt = fmt.render_prompt([{"role": "system", "content": "S"}, {"role": "user", "content": ep["prompt"]}], env.tool_schemas)
        assert first.endswith(prompt[prompt.index(ep["prompt"]):]), (name, first[-200:])


@pytest.mark.slow
@pytest.mark.timeout(1500)
@pytest.mark.parametrize("name", ["llama3_json", "mistral"])
def test_smollm2_trains_in_a_family_format_and_trains_the_tokens_it_sampled(tmp_path, name):
    """SmolLM2 (no token of these families' markup) through the calculator recipe in the family's
    format: SFT on the demonstrations, two RL steps, every episode's prompt the format's rendering
    after the BOS, calls written in the family's syntax and parsed, and the trained tokens the sampled
    ones (the loss mask) with the sampler's logprobs the trainer's (docs/formats.md)."""
    import json

    from agentic_rl.envs.formats import bos_text
    from agentic_rl.envs.registry import resolve_env
    from agentic_rl.models.loader import load_tokenizer
    from agentic_rl.trainer import loop
    from agentic_rl.trainer.config import load_config

    cfg = load_config("recipes/calculator.yaml", [
        f"output_dir={tmp_path}", f"env.options.format={name}", "rl.steps=2", "rl.tasks.per_step=4",
        "rl.tasks.group_size=4", "eval.baselines=false", "eval.tasks_per_split=8", "eval.batch_size=16",
        "sft.graduation=false", "checkpoint.every=100", "log.progress=false", "log.tensorboard=false"])
    loop.train(cfg)
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    rl = [r for r in rows if r["stage"] == "rl"]
    assert [r["step"] for r in rl] == [1, 2] and sum(r["trained_tokens"] for r in rl) > 0
    # bf16 sampler against the trainer under bf16 autocast: measured 0.005-0.015 a token (docs/formats.md)
    assert all(r["engine_logprob_abs_diff"] < 0.05 for r in rl if r["trained_tokens"])
    tok, fmt, spec = load_tokenizer("smollm2"), get_format(name), resolve_env(cfg.env.name, cfg.env.options)
    episodes = [json.loads(line) for line in (tmp_path / "trajectories" / "rl.jsonl").read_text().splitlines()]
    assert sum(len(t["tool_calls"]) for ep in episodes for t in ep["turns"]) > 0  # calls in the family's syntax, parsed
    for ep in episodes:
        ids, mask = ep["token_ids"], ep["loss_mask"]
        assert [t for t, m in zip(ids, mask) if m] == [t for turn in ep["turns"] for t in turn["action_ids"]]
        env = spec.make_env(cfg.env.options)
        messages = env.reset(Task(ep["task_id"], ep["prompt"], ep["answer"], ep["meta"]))
        assert ids[0] == tok.bos_token_id  # SmolLM2's BOS, where the family's template opens with bos_token
        assert ep["turns"][0]["obs_text"] == bos_text(fmt, tok) + fmt.render_prompt(messages, env.tool_schemas)
