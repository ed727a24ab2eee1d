"""The tag protocol (Search-R1, ReTool) and OpenAI messages through a chat template: each renders
prefix-preservingly (what the rollout concatenates equals a full render) and parses without raising."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from agentic_rl.envs.formats import FORMATS, HERMES, RETOOL, SEARCH_R1, ChatTemplateFormat, get_format

SEARCH_TOOLS = [{"type": "function", "function": {"name": "search"}}]
SEARCH_CONV = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Who founded Vorel?"},
    {"role": "assistant", "content": "<think>I should search.</think>",
     "tool_calls": [{"function": {"name": "search", "arguments": {"query": "Vorel founder"}}}]},
    {"role": "tool", "name": "search", "content": "Doc 1 (Vorel): founded by Kesa Dumar."},
    {"role": "assistant", "content": "<answer>Kesa Dumar</answer>"},
]


def test_tag_actions_and_results_stay_inside_one_assistant_turn():
    text = SEARCH_R1.render_prompt(SEARCH_CONV, SEARCH_TOOLS)
    turn = text.split("<|im_start|>assistant\n")[1]
    assert turn == ("<think>I should search.</think>\n<search>Vorel founder</search>"
                    "\n\n<information>Doc 1 (Vorel): founded by Kesa Dumar.</information>\n\n"
                    "<answer>Kesa Dumar</answer><|im_end|>\n")
    assert "<search>query</search>" in text.split("<|im_end|>")[0]  # the protocol is in the system turn


def test_tag_prompt_plus_action_plus_glue_equals_full_render():
    head = SEARCH_R1.render_prompt(SEARCH_CONV[:2], SEARCH_TOOLS)
    action = SEARCH_R1.render_assistant_body(SEARCH_CONV[2])  # generation stops after </search>
    glue = SEARCH_R1.render_observation(SEARCH_CONV[3:4], action_closed=False)
    assert head + action + glue == SEARCH_R1.render_prompt(SEARCH_CONV[:4], SEARCH_TOOLS)
    final = SEARCH_R1.render_assistant_body(SEARCH_CONV[4]) + SEARCH_R1.end_of_turn
    assert SEARCH_R1.render_prompt(SEARCH_CONV, SEARCH_TOOLS).startswith(head + action + glue + final)


def test_tag_parse_cases():
    ok = SEARCH_R1.parse("<think>hm</think>\n<search> capital of Tarn </search>")
    assert ok.tool_calls[0].name == "search" and ok.tool_calls[0].arguments == {"query": "capital of Tarn"}
    code = RETOOL.parse("<code>\nx = 2\nprint(x * 21)\n</code>")
    assert code.tool_calls[0].name == "python" and code.tool_calls[0].arguments["code"] == "x = 2\nprint(x * 21)"
    assert SEARCH_R1.parse("<think>easy</think><answer>4</answer>").is_final
    assert "empty" in SEARCH_R1.parse("<search>  </search>").errors[0]
    assert "not closed" in SEARCH_R1.parse("<search>capital of").errors[0]
    assert RETOOL.stop_strings == ("</code>",) and SEARCH_R1.stop_strings == ("</search>",)


fragments = st.sampled_from(["<search>", "</search>", "<code>", "</code>", "<answer>", "</answer>", "<think>",
                             "\n", "\x00", "<", ">", "/", "search", "code"])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.text(max_size=12), fragments), max_size=25).map("".join))
def test_tag_parser_never_raises(text):
    """Invariant: any model output parses to calls and/or error messages, for both tag protocols."""
    for fmt in (SEARCH_R1, RETOOL):
        parsed = fmt.parse(text)
        assert parsed.attempted == bool(parsed.tool_calls or parsed.errors)
        assert all(c.arguments[next(iter(c.arguments))] for c in parsed.tool_calls)


CALC_CONV = [
    {"role": "system", "content": "Be careful."},
    {"role": "user", "content": "What is 2 + 3 * 4?"},
    {"role": "assistant", "content": "I will use the calculator.",
     "tool_calls": [{"type": "function", "function": {"name": "calculator", "arguments": {"expression": "2 + 3 * 4"}}}]},
    {"role": "tool", "name": "calculator", "tool_call_id": "call_0", "content": "14"},
    {"role": "assistant", "content": "<answer>14</answer>"},
]


def test_openai_messages_through_our_template_render_as_hermes():
    """Our shipped template is the hermes format written in Jinja, so the two protocols must agree
    on every piece: prompt, action body and glue (closed and open turn)."""
    fmt = ChatTemplateFormat()
    assert fmt.render_prompt(CALC_CONV, [{"type": "function", "function": {"name": "calculator"}}]) == \
        HERMES.render_prompt(CALC_CONV, [{"type": "function", "function": {"name": "calculator"}}])
    assert fmt.render_assistant_body(CALC_CONV[2]) == HERMES.render_assistant_body(CALC_CONV[2])
    for closed in (False, True):
        assert fmt.render_observation(CALC_CONV[3:4], closed) == HERMES.render_observation(CALC_CONV[3:4], closed)


def test_openai_action_message_round_trips():
    fmt = get_format("openai")
    message = fmt.action_message(fmt.render_assistant_body(CALC_CONV[2]))
    assert message["content"] == "I will use the calculator."
    assert message["tool_calls"][0]["function"] == {"name": "calculator", "arguments": '{"expression": "2 + 3 * 4"}'}
    assert fmt.render_assistant_body(message) == fmt.render_assistant_body(CALC_CONV[2])


def test_format_registry_lists_names_on_a_miss():
    assert {"hermes", "openai", "search_r1", "retool"} <= set(FORMATS)
    try:
        get_format("nope")
    except KeyError as e:
        assert "hermes" in str(e)
    else:
        raise AssertionError("unknown format did not raise")
