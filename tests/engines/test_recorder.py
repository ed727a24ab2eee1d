"""The recording proxy's rows (`engines/recorder.py`): an agent's replies sent back unedited are fed as
they were sampled, so an episode's calls extend each other and make one trajectory whose tokens are
exactly what the policy was fed and sampled; an edited history starts a new context, each exact, in one trajectory.

The sampled ids are deliberately a tokenization the tokenizer would never produce for their text
(one token a character), so a prompt built by re-rendering the reply's text could not extend them:
the extension shows the sampled ids were used.
"""

from __future__ import annotations

import functools
import json

import pytest

from agentic_rl.engines.recorder import Call, Episode, Limits, Recorder, trajectory
from agentic_rl.engines.server import render_chat
from agentic_rl.envs.formats import format_of_template
from agentic_rl.models.loader import load_tokenizer
from agentic_rl.types import Task

TOOLS = [{"type": "function", "function": {"name": "calculator", "parameters": {"type": "object"}}}]
CALL_TEXT = '<tool_call>\n{"name": "calculator", "arguments": {"expression": "6*7"}}\n</tool_call>'


@pytest.fixture(scope="module")
def tok():
    return load_tokenizer("tiny")


def render(tok):
    return functools.partial(render_chat, format_of_template(tok.chat_template), tok)


def char_ids(tok, text: str) -> tuple[int, ...]:
    """`text` one character a token: ids a policy may sample, never the tokenizer's own encoding."""
    return tuple(i for ch in text for i in tok(ch, add_special_tokens=False)["input_ids"])


def _call(prompt, ids, message, stop="stop") -> Call:
    return Call(tuple(prompt), tuple(ids), tuple(-0.5 for _ in ids), "", stop, message, 0)


def _echo(message: dict) -> dict:
    """The reply as an OpenAI-SDK agent sends it back: its own call id, the JSON re-serialized."""
    calls = [{"id": "call_x", "type": "function",
              "function": {"name": c["function"]["name"],
                           "arguments": json.dumps(json.loads(c["function"]["arguments"]), indent=1)}}
             for c in message.get("tool_calls", [])]
    return {"role": "assistant", "content": message.get("content"), **({"tool_calls": calls} if calls else {})}


def _episode(tok, edit: bool = False) -> tuple[Recorder, list[Call]]:
    """Three calls: a tool call, a plain reply that ends with the end-of-turn token, a final answer."""
    rec, r = Recorder(tok, eos_ids=[tok.eos_token_id]), render(tok)
    messages = [{"role": "system", "content": "Solve it."}, {"role": "user", "content": "What is 6*7?"}]
    replies = [({"role": "assistant", "content": None, "tool_calls": [{"id": "call_1", "type": "function", "function": {
                    "name": "calculator", "arguments": '{"expression": "6*7"}'}}]}, char_ids(tok, CALL_TEXT), "stop"),
               ({"role": "assistant", "content": "It is 42"}, (*char_ids(tok, "It is 42"), tok.eos_token_id), "eos"),
               ({"role": "assistant", "content": "Answer: 42"}, (*char_ids(tok, "Answer: 42"), tok.eos_token_id), "eos")]
    calls = []
    for k, (message, ids, stop) in enumerate(replies):
        prompt = rec.prompt_ids("e", messages, TOOLS, r)
        rec.record("e", _call(prompt, ids, message, stop))
        calls.append(rec.episode("e").calls[-1])
        sent = _echo(message)
        if edit and k == 1:
            sent["content"] = "It is 42."  # the agent edits what the policy said
        messages += [sent, {"role": "tool", "content": "42"} if k == 0 else {"role": "user", "content": "Answer?"}]
    return rec, calls


def test_replies_sent_back_are_fed_as_sampled_and_the_episode_is_one_trajectory(tok):
    rec, calls = _episode(tok)
    for before, after in zip(calls, calls[1:]):
        assert after.prompt_ids[: len(before.prompt_ids) + len(before.ids)] == before.prompt_ids + before.ids
    t = trajectory(rec.episode("e"), Task("t", "p"))
    assert t.restarts == 0 and len(t.turns) == 3
    assert tuple(t.token_ids()) == calls[-1].prompt_ids + calls[-1].ids  # every token the policy saw or sampled
    sampled = [tok_id for c in calls for tok_id in c.ids]
    assert [i for i, m in zip(t.token_ids(), t.loss_mask()) if m] == sampled  # trained = sampled, nothing else
    assert [lp for lp, m in zip(t.sampled_logprobs(), t.loss_mask()) if m] == [-0.5] * len(sampled)
    # the end-of-turn token the second reply sampled is not repeated by the template after it
    end = len(calls[1].prompt_ids) + len(calls[1].ids)
    assert tok.decode(calls[2].prompt_ids[end - 1 : end + 1]) == "<|im_end|>\n"


def test_a_re_rendered_history_would_not_extend_the_sampled_ids(tok):
    """The witness: the second prompt built from the reply's text (what a proxy that re-tokenizes
    does) is not an extension of the first call's prompt + sampled ids."""
    _, calls = _episode(tok)
    first = calls[0]
    messages = [{"role": "system", "content": "Solve it."}, {"role": "user", "content": "What is 6*7?"},
                _echo(first.message), {"role": "tool", "content": "42"}]
    plain = tok(render(tok)(messages, TOOLS), add_special_tokens=False)["input_ids"]
    assert tuple(plain[: len(first.prompt_ids) + len(first.ids)]) != first.prompt_ids + first.ids


def test_an_edited_history_starts_a_new_context_each_exact(tok):
    """The agent edited the policy's reply: the third call's prompt does not extend the second's, so
    the episode (still one trajectory, one sample of its group) trains two contexts, each exactly
    the tokens its calls were fed and sampled."""
    rec, calls = _episode(tok, edit=True)
    t = trajectory(rec.episode("e"), Task("t", "p"), reward=1.0)
    assert [turn.restart for turn in t.turns] == [False, False, True] and t.reward == 1.0
    rows = t.contexts()
    assert [len(r.turns) for r in rows] == [2, 1]
    assert tuple(rows[0].token_ids()) == calls[1].prompt_ids + calls[1].ids
    assert tuple(rows[1].token_ids()) == calls[2].prompt_ids + calls[2].ids  # its own exact prompt
    assert t.segment_ids() == [0] * len(rows[0].token_ids()) + [1] * len(rows[1].token_ids())


def test_an_episode_without_calls_has_no_rows():
    assert trajectory(Episode("e"), Task("t", "p")) is None


def _reasoning_episode(tok, history: str) -> tuple[Recorder, list[Call]]:
    """A Qwen3-style template (`REASONING_CHATML_TEMPLATE`): two replies with reasoning answer one
    question (a tool result between them); then the user speaks again, and the template renders the
    earlier replies without their reasoning."""
    from agentic_rl.models.chat_template import REASONING_CHATML_TEMPLATE

    rec = Recorder(tok, eos_ids=[tok.eos_token_id], history=history)
    r = functools.partial(render_chat, format_of_template(REASONING_CHATML_TEMPLATE), tok)
    messages = [{"role": "system", "content": "Solve it."}, {"role": "user", "content": "What is 6*7?"}]
    texts, follow = ["<think>\nuse the tool\n</think>\n\nchecking", "<think>\nit said 42\n</think>\n\nIt is 42.", "Yes."], \
        [{"role": "tool", "content": "42"}, {"role": "user", "content": "Sure?"}, None]
    calls = []
    for text, after in zip(texts, follow):
        rec.record("e", _call(rec.prompt_ids("e", messages, None, r), (*char_ids(tok, text), tok.eos_token_id),
                              {"role": "assistant", "content": text}, "eos"))
        calls.append(rec.episode("e").calls[-1])
        messages += [{"role": "assistant", "content": text}, *([after] if after else [])]
    return rec, calls


def test_a_template_that_drops_earlier_reasoning_keeps_history_or_restarts_as_chosen(tok):
    """history: keep feeds the replies as sampled (one trajectory, reasoning and all); history:
    template feeds what the template renders: the replies to the first question keep their reasoning
    (one context), and after the user speaks again they are rendered without it, so the third call
    starts a context of its own, whose prompt holds no reasoning. Every context is its calls' exact
    tokens."""
    rec, calls = _reasoning_episode(tok, "keep")
    t = trajectory(rec.episode("e"), Task("t", "p"))
    assert len(t.turns) == 3 and t.restarts == 0 and tuple(t.token_ids()) == calls[-1].prompt_ids + calls[-1].ids

    rec, calls = _reasoning_episode(tok, "template")
    rows = trajectory(rec.episode("e"), Task("t", "p")).contexts()
    assert [len(t.turns) for t in rows] == [2, 1]
    assert tuple(rows[0].token_ids()) == calls[1].prompt_ids + calls[1].ids
    assert tuple(rows[1].token_ids()) == calls[2].prompt_ids + calls[2].ids
    third = tok.decode(calls[2].prompt_ids)
    assert "<think>" not in third and "checking<|im_end|>" in third and "It is 42.<|im_end|>" in third
    with pytest.raises(ValueError, match="history"):
        Recorder(tok, history="sometimes")


def _ask(rec: Recorder, tok, ids: tuple[int, ...]) -> Call:
    """One call of episode "e" (the conversation so far sent back unedited), recorded; the call as kept."""
    messages = [{"role": "user", "content": "What is 6*7?"}]
    for c in rec.episodes.get("e", Episode("e")).calls:
        messages += [_echo(c.message), {"role": "user", "content": "Go on."}]
    prompt = rec.prompt_ids("e", messages, None, render(tok))
    rec.record("e", _call(prompt, ids, {"role": "assistant", "content": tok.decode(list(ids))}))
    return rec.episode("e").calls[-1]


def test_a_call_past_the_turn_budget_is_refused_and_the_episode_truncated(tok):
    """rollout.max_turns: 2 calls answered, the third refused before it samples (HTTP 400, which an
    OpenAI client does not retry); the episode is the two calls, truncated, not terminated."""
    from fastapi import HTTPException

    rec = Recorder(tok, eos_ids=[tok.eos_token_id], limits=Limits(max_turns=2))
    for text in ("It is", "42"):
        _ask(rec, tok, char_ids(tok, text))
    with pytest.raises(HTTPException) as refused:
        _ask(rec, tok, char_ids(tok, "again"))
    assert refused.value.status_code == 400 and "rollout.max_turns" in refused.value.detail
    t = trajectory(rec.episode("e"), Task("t", "p"))
    assert len(t.turns) == 2 and t.truncated and not t.terminated


def test_a_reply_past_the_token_budget_is_kept_cut_and_refused(tok):
    """rollout.max_episode_tokens 10: a first reply of 6 tokens is answered; the second, 8 tokens,
    leaves room for 4, so its first 4 sampled ids and logprobs are kept (stop reason `length`) and
    the reply is refused, so the agent never acts on the 4 tokens that are not trained; a third call
    is refused before it samples. Without a budget the same calls are kept whole."""
    from fastapi import HTTPException

    first, second = char_ids(tok, "It is "), char_ids(tok, "42, yes.")
    assert (len(first), len(second)) == (6, 8)
    rec = Recorder(tok, eos_ids=[tok.eos_token_id], limits=Limits(max_episode_tokens=10))
    _ask(rec, tok, first)
    with pytest.raises(HTTPException, match="first 4 tokens"):
        _ask(rec, tok, second)
    kept = rec.episode("e").calls[-1]
    assert kept.ids == second[:4] and kept.logprobs == (-0.5,) * 4 and kept.stop_reason == "length"
    assert kept.text == tok.decode(list(second[:4]))
    with pytest.raises(HTTPException, match="rollout.max_episode_tokens"):
        _ask(rec, tok, char_ids(tok, "!"))
    t = trajectory(rec.episode("e"), Task("t", "p"))
    assert t.num_generated == 10 and t.truncated and [turn.stop_reason for turn in t.turns] == ["stop", "length"]
    free = Recorder(tok, eos_ids=[tok.eos_token_id])
    assert [_ask(free, tok, ids).ids for ids in (first, second)] == [first, second]
    assert not trajectory(free.episode("e"), Task("t", "p")).truncated


def test_a_closed_episode_refuses_its_calls_and_its_reward(tok):
    """An episode given up on (its deadline passed) keeps nothing: a later call or reward of it is
    refused (410), and no episode is opened under its id again."""
    from fastapi import HTTPException

    rec = Recorder(tok, eos_ids=[tok.eos_token_id])
    _ask(rec, tok, char_ids(tok, "It is"))
    assert len(rec.close("e").calls) == 1
    for late in (lambda: _ask(rec, tok, char_ids(tok, "42")), lambda: rec.set_reward("e", 1.0)):
        with pytest.raises(HTTPException) as refused:
            late()
        assert refused.value.status_code == 410
    assert "e" not in rec.episodes
