"""The hermes format: its Python rendering equals the Jinja template we install on tokenizers, and
its parser turns any text into calls or error messages without raising."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from agentic_rl.envs.formats import HERMES
from agentic_rl.tools import calculator, function_schema

CONVERSATION = [
    {"role": "system", "content": "Be careful."},
    {"role": "user", "content": "What is 2 + 3 * 4?"},
    {
        "role": "assistant",
        "content": "I will use the calculator.",
        "tool_calls": [{"type": "function", "function": {"name": "calculator", "arguments": {"expression": "2 + 3 * 4"}}}],
    },
    {"role": "tool", "name": "calculator", "content": "14"},
    {"role": "assistant", "content": "<answer>14</answer>"},
    {"role": "user", "content": "And 1 + 1, twice?"},
    {"role": "assistant", "content": "", "tool_calls": [
        {"type": "function", "function": {"name": "calculator", "arguments": {"expression": "1 + 1"}}},
        {"type": "function", "function": {"name": "calculator", "arguments": {"expression": "1+1"}}},
    ]},
    {"role": "tool", "name": "calculator", "content": "2"},
    {"role": "tool", "name": "calculator", "content": "2"},
]


def test_python_rendering_equals_installed_jinja_template(tokenizer):
    tools = [function_schema(calculator)]
    jinja = tokenizer.apply_chat_template(CONVERSATION, tools=tools, tokenize=False, add_generation_prompt=True)
    assert HERMES.render_prompt(CONVERSATION, tools) == jinja


def test_prompt_plus_action_plus_glue_equals_full_render():
    """Prefix preservation: what the rollout concatenates is what a full render would show."""
    tools = [function_schema(calculator)]
    head = HERMES.render_prompt(CONVERSATION[:2], tools)
    action = HERMES.render_assistant_body(CONVERSATION[2])  # generation stops after </tool_call>
    glue = HERMES.render_observation(CONVERSATION[3:4], action_closed=False)
    assert head + action + glue == HERMES.render_prompt(CONVERSATION[:4], tools)


def test_parse_cases():
    ok = HERMES.parse('x <tool_call>\n{"name": "calculator", "arguments": {"expression": "1+2"}}\n</tool_call>')
    assert ok.attempted and not ok.errors and ok.tool_calls[0].arguments == {"expression": "1+2"}
    listed = HERMES.parse('<tool_call>[{"name": "a", "arguments": {}}, {"name": "b", "arguments": "{}"}]</tool_call>')
    assert [c.name for c in listed.tool_calls] == ["a", "b"]
    assert HERMES.parse("<answer>3</answer>").is_final
    bad_json = HERMES.parse('<tool_call>{"name": "calculator", "arguments": {"expression": 7 * 6}}</tool_call>')
    assert bad_json.attempted and not bad_json.tool_calls and "not valid JSON" in bad_json.errors[0]
    unclosed = HERMES.parse('<tool_call>{"name": "calculator"')
    assert unclosed.attempted and "not closed" in unclosed.errors[0]
    no_name = HERMES.parse('<tool_call>{"arguments": {}}</tool_call>')
    assert 'no "name"' in no_name.errors[0]
    bad_args = HERMES.parse('<tool_call>{"name": "f", "arguments": [1]}</tool_call>')
    assert "must be a JSON object" in bad_args.errors[0]


fragments = st.sampled_from(["<tool_call>", "</tool_call>", "{", "}", '"name"', '"arguments"', ":", ",", "[", "]",
                             '"calculator"', "null", "1e999", "\\", '"', "\n", "<answer>", "[" * 50])


@settings(max_examples=400, deadline=None)
@given(st.lists(st.one_of(st.text(max_size=20), fragments), max_size=30).map("".join))
def test_parser_never_raises(text):
    """Invariant: any model output parses to calls and/or error messages; nothing raises."""
    parsed = HERMES.parse(text)
    assert parsed.attempted == bool(parsed.tool_calls or parsed.errors)
    assert all(isinstance(e, str) and e for e in parsed.errors)
