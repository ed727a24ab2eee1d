"""A streamed reply's content as its tokens come (`engines/sse.py`): decoded incrementally with an
incomplete UTF-8 character held back, and nothing sent that the finished reply might not have as
content (a call's opening, a stop string, the end of turn, the tail that could begin one, trailing
whitespace). The finished content is computed independently, by `server.reply_message` over the
whole reply, as the non-streamed body has it."""

from __future__ import annotations

import pytest

from agentic_rl.engines.server import reply_message
from agentic_rl.engines.sse import ContentStream, safe_prefix
from agentic_rl.envs.formats import MISTRAL, format_of_template


def _pushed(tokenizer, ids, holds, **kw) -> list[str]:
    stream = ContentStream(tokenizer, holds, frozenset({tokenizer.eos_token_id}), **kw)
    return [d for d in (stream.push(t) for t in ids) if d]


def test_a_character_split_over_tokens_is_sent_whole(tokenizer):
    text = "Voilà: 3 × 7 = 21 ✓ 😀 done"
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    # the witness: some prefix of the ids ends inside a character (byte-level tokens)
    assert any(tokenizer.decode(ids[:k]).endswith("\ufffd") for k in range(1, len(ids)))
    deltas = _pushed(tokenizer, ids, ())
    assert "".join(deltas) == text.rstrip() and not any("\ufffd" in d for d in deltas) and len(deltas) > 3


@pytest.mark.parametrize("fmt_name", ["hermes", "mistral"])
def test_nothing_is_sent_that_the_finished_reply_does_not_have_as_content(tokenizer, fmt_name):
    fmt = MISTRAL if fmt_name == "mistral" else format_of_template(tokenizer.chat_template)
    calls = ('[TOOL_CALLS] [{"name": "calculator", "arguments": {"expression": "6*7"}}]' if fmt_name == "mistral"
             else '<tool_call>\n{"name": "calculator", "arguments": {"expression": "6*7"}}\n</tool_call>')
    eos = frozenset({tokenizer.eos_token_id})
    for reply in ("Let me compute  it.\n\n" + calls, "It is 42, <tool not a call.", "Plain words then STOP here"):
        ids = tokenizer(reply, add_special_tokens=False)["input_ids"]
        holds = ("STOP", fmt.end_of_turn, *fmt.call_openers)
        stream = ContentStream(tokenizer, holds, eos)
        sent = ""
        for t in ids:
            sent += stream.push(t)
            # after every token: what went out is a prefix of the content, whatever the reply did next
            content = reply_message(fmt, tokenizer, ids, eos, ("STOP",))["content"] or ""
            assert content.startswith(sent)
        assert sent  # the witness: text before the call (or the stop) went out before the end
    assert sent == "Plain words then"  # the stop string and the space before it were never sent


def test_the_tail_that_could_begin_a_hold_waits():
    assert safe_prefix("Hello <tool_ca", ["<tool_call>"]) == "Hello"
    assert safe_prefix("Hello <b>", ["<tool_call>"]) == "Hello <b>"
    assert safe_prefix("a [TOOL_CALLS] [", ["[TOOL_CALLS]"]) == "a"
    assert safe_prefix("x S", ["STOP"]) == "x"
