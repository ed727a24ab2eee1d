"""check-env passes the built-in envs and catches what breaks training: nondeterministic tasks, a
step that raises, a demonstration that does not solve its task, an env that never ends a call loop."""

from __future__ import annotations

import dataclasses
import itertools

import pytest

from agentic_rl.engines.base import SamplingParams
from agentic_rl.engines.scripted import ScriptedEngine
from agentic_rl.envs.registry import ENVS, get_env, register_env
from agentic_rl.rollout.conformance import check_env

_counter = itertools.count()


@pytest.mark.parametrize("name", ["calculator", "calculator_plan", "calculator_compound", "calculator_mixed", "calculator_chain",
                                  "calculator_recover"])
@pytest.mark.parametrize("fmt", ["hermes", "openai", "openai_reasoning"])
def test_calculator_passes_every_check(tokenizer, fmt, name):
    checks = check_env(name, tokenizer, {"format": fmt})
    assert [c.name for c in checks if not c.passed] == [], [c for c in checks if not c.passed]
    assert len(checks) == 9


def test_a_rewriting_template_starts_exact_contexts_and_a_loop_that_ignores_it_fails(tokenizer, monkeypatch):
    """`openai_reasoning`: reasoning laid out otherwise than the template renders it starts new
    contexts, and every turn's prompt is the template's rendering. A loop that appended the glue
    anyway (what `history: keep` does) would train prompts the deployed model never sees: the check
    fails."""
    from agentic_rl.rollout import loop

    (check,) = [c for c in check_env("calculator", tokenizer, {"format": "openai_reasoning"})
                if c.name == "rewritten history starts exact contexts"]
    assert check.passed and "new contexts" in check.detail, check
    monkeypatch.setattr(loop, "_as_rendered", lambda ep, sample, observation, glue, tok: tok.encode(
        glue, add_special_tokens=False))
    (check,) = [c for c in check_env("calculator", tokenizer, {"format": "openai_reasoning"})
                if c.name == "rewritten history starts exact contexts"]
    assert not check.passed and "is not the rendering" in check.detail, check


ROUND_TRIP = "the checkpoint's template round-trips through the server"


@pytest.mark.parametrize("breakage", ["calls read as hermes", "end of turn fed twice"])
def test_a_server_that_breaks_the_format_fails_the_round_trip(tokenizer, monkeypatch, breakage):
    """Llama's format on SmolLM2 through the server: passes; a server that reads every reply as hermes
    (no tool_calls come back), or a proxy that feeds the template's <|eot_id|> after a reply that
    ended with that text (the rows are not the SFT rows), fails."""
    from agentic_rl.engines import recorder, server

    def passed() -> tuple[bool, str]:
        (check,) = [c for c in check_env("calculator", tokenizer, {"format": "llama3_json"}) if c.name == ROUND_TRIP]
        return check.passed, check.detail

    assert passed()[0]
    if breakage == "calls read as hermes":
        real = server.reply_message
        from agentic_rl.envs.formats import get_format

        monkeypatch.setattr(server, "reply_message", lambda fmt, *a: real(get_format("openai"), *a))
        want = "the server parsed []"
    else:
        monkeypatch.setattr(recorder.Recorder, "_text_end", lambda self, call: "")
        want = "not the SFT sequence"
    ok, detail = passed()
    assert not ok and want in detail, detail


@pytest.fixture
def variant():
    """Register a modified copy of the calculator env under a fresh name; unregister after."""
    names = []

    def make(**changes):
        name = f"broken-{next(_counter)}"
        names.append(name)
        register_env(dataclasses.replace(get_env("calculator"), name=name, **changes))
        return name

    yield make
    for name in names:
        ENVS.pop(name, None)


def _failed(tokenizer, name) -> set[str]:
    return {c.name for c in check_env(name, tokenizer) if not c.passed}


def test_nondeterministic_tasks_fail(tokenizer, variant):
    spec = get_env("calculator")
    calls = itertools.count()
    name = variant(tasks=lambda split, n, seed: spec.tasks(split, n, seed + next(calls)))
    assert "tasks are seeded" in _failed(tokenizer, name)


def test_a_raising_step_fails(tokenizer, variant):
    spec = get_env("calculator")

    def make_env(options):
        env = spec.make_env(options)
        env.step = lambda action: 1 / 0
        return env

    assert "bad actions are observations" in _failed(tokenizer, variant(make_env=make_env))


def test_a_wrong_demonstration_fails(tokenizer, variant):
    spec = get_env("calculator")

    def wrong(task, env):
        demo = spec.demonstration(task, env)
        return [*demo[:-1], {"role": "assistant", "content": "<answer>-1</answer>"}]

    assert _failed(tokenizer, variant(demonstration=wrong)) == {"demonstrations solve their tasks"}


def test_scripted_engine_stops_like_a_real_engine(tokenizer):
    """After the first stop string, at end of turn, or at the token limit — whichever comes first."""
    texts = ["a <tool_call>x</tool_call> b</tool_call>", "done<|im_end|>ignored", "word " * 50]
    engine = ScriptedEngine(tokenizer, lambda row, turn: texts[row])
    params = SamplingParams(max_new_tokens=40, stop_strings=("</tool_call>",))
    got = [engine.sample(r, 0, params, limit) for r, limit in enumerate((40, 40, 10))]
    assert [s.stop_reason for s in got] == ["stop", "eos", "length"]
    assert got[0].text == "a <tool_call>x</tool_call>" and got[1].text == "done<|im_end|>"
    assert len(got[2].ids) == 10
