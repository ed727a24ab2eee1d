"""LLM-as-judge: a rubric prompt answered by any chat model, parsed into a score in [0, 1].

The judge is an `engine` with `complete(messages) -> str` and, to grade many episodes at once,
`complete_many(conversations) -> [str | Exception]`: the embedded model (`EmbeddedJudge`, any local
HF model with a chat template, every prompt of a batch decoded together), or any OpenAI-compatible
server (`OpenAIJudge`: vLLM, llama.cpp, our `agentic-rl serve`, an API; requests in parallel, each
with its timeout). `CachedJudge` keeps each answer by the prompt's content, so an episode graded
once is never graded again (a group's fallback, a re-scored episode, a resumed step).

A judge that fails — its engine raises or times out, or it writes no parsable score — raises
`JudgeError`: an infrastructure failure of kind `judge` (`faults.py`). The episode leaves the loss and
its group's statistics; it is never mistaken for a real zero. `prepare(groups)` grades a whole
step's episodes in one batch before they are scored one by one (`rewards/scoring.py`).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import urllib.request
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Protocol

from agentic_rl.faults import InfrastructureError
from agentic_rl.rewards.base import Score
from agentic_rl.types import Task, Trajectory, TrajectoryGroup

Messages = Sequence[Mapping[str, str]]

DEFAULT_RUBRIC = ("Judge whether the response answers the question correctly and completely. "
                  "Give 10 for a fully correct answer, 0 for a wrong or missing one.")
_SYSTEM = "You are a strict, fair grader. Read the task and the response, then grade it."


class JudgeError(InfrastructureError):
    """The judge could not grade an episode: the machine's failure, not the policy's."""

    kind = "judge"


class JudgeEngine(Protocol):
    def complete(self, messages: Messages) -> str: ...


def complete_many(engine: JudgeEngine, conversations: Sequence[Messages]) -> list[str | Exception]:
    """Each conversation's answer, or the exception its request raised: in one batch where the engine
    has `complete_many`, else one at a time."""
    if hasattr(engine, "complete_many"):
        return engine.complete_many(conversations)
    out: list[str | Exception] = []
    for messages in conversations:
        try:
            out.append(engine.complete(messages))
        except Exception as e:  # noqa: BLE001 - kept per conversation; the caller decides
            out.append(e)
    return out


def parse_score(text: str, scale: float) -> float | None:
    """The judge's score as a fraction of `scale`, from the forms judges actually write:
    `{"score": 7}`, `Score: 7/10`, `**Score:** 7`, `7 out of 10`, a bare last number. None if there
    is no number in [0, scale]."""
    for m in re.finditer(r"\{[^{}]*\}", text):
        try:
            v = json.loads(m.group(0)).get("score")
        except (json.JSONDecodeError, AttributeError):
            continue
        if isinstance(v, (int, float)) and 0 <= v <= scale:
            return float(v) / scale
    patterns = (r"score\W*(?:is\W*)?(-?\d+(?:\.\d+)?)", r"(-?\d+(?:\.\d+)?)\s*(?:/|out of)\s*\d+")
    for pattern in patterns:
        found = re.findall(pattern, text, re.IGNORECASE)
        if found and 0 <= float(found[-1]) <= scale:
            return float(found[-1]) / scale
    numbers = [float(x) for x in re.findall(r"-?\d+(?:\.\d+)?", text)]
    return numbers[-1] / scale if numbers and 0 <= numbers[-1] <= scale else None


@dataclass(frozen=True)
class LLMJudge:
    """value = score / scale. The prompt shows the task, the reference answer if the task has one, the
    response (the final action, or the whole episode's actions with `whole_episode`) and the rubric."""

    engine: JudgeEngine
    rubric: str = DEFAULT_RUBRIC
    scale: float = 10.0
    whole_episode: bool = False

    def __call__(self, task: Task, trajectory: Trajectory) -> Score:
        return self.grade(task, self.response(trajectory))

    def response(self, trajectory: Trajectory) -> str:
        return "\n".join(t.action_text for t in trajectory.turns) if self.whole_episode else trajectory.final_text

    def prepare(self, groups: Sequence[TrajectoryGroup]) -> None:
        """Grades every episode of `groups` in one batch, so a `CachedJudge` answers the scoring that
        follows from memory; without a cache there is nothing to keep, so nothing is asked."""
        if isinstance(self.engine, CachedJudge):
            self.engine.complete_many([self.messages(g.task, self.response(t)) for g in groups for t in g.trajectories])

    def messages(self, task: Task, response: str, context: str = "") -> list[dict[str, str]]:
        reference = f"\nReference answer: {task.answer}" if task.answer is not None else ""
        prompt = (f"Task: {task.prompt}{reference}\n{context}\nResponse:\n{response}\n\nRubric: {self.rubric}\n"
                  f"End with a line 'Score: N' where N is from 0 to {self.scale:g}.")
        return [{"role": "system", "content": _SYSTEM}, {"role": "user", "content": prompt}]

    def grade(self, task: Task, response: str, context: str = "") -> Score:
        """The judge's score; raises `JudgeError` when it cannot give one."""
        return self.parse(complete_many(self.engine, [self.messages(task, response, context)])[0])

    def parse(self, answer: str | Exception) -> Score:
        if isinstance(answer, Exception):
            raise JudgeError(f"judge failed: {type(answer).__name__}: {answer}") from answer
        value = parse_score(answer, self.scale)
        if value is None:
            raise JudgeError(f"judge wrote no score: {answer[:200]!r}")
        return Score(value, {"judge_score": value})


@dataclass(frozen=True)
class JudgeTurns:
    """A process reward: the judge grades each turn (its action, with the observation it got) in the
    context of the task; turn reward = weight x (score - 0.5), so an average step is neutral. A turn
    the judge cannot grade gets 0."""

    judge: LLMJudge
    weight: float = 0.2

    def __call__(self, trajectory: Trajectory) -> list[float]:
        """One reward per turn, every turn graded in one batch; raises `JudgeError` if a turn cannot be."""
        j = self.judge
        conversations = [j.messages(trajectory.task, turn.action_text, f"This is step {k + 1} of the response; "
                                    f"the tool returned: {turn.observation[:500]!r}")
                         for k, turn in enumerate(trajectory.turns)]
        return [self.weight * (j.parse(a).value - 0.5) for a in complete_many(j.engine, conversations)]


class EmbeddedJudge:
    """A local chat model as judge, greedy, through the embedded engine."""

    def __init__(self, model, tokenizer, max_new_tokens: int = 64, precision: str = "auto"):
        from agentic_rl.engines.hf import HFEngine

        self.engine, self.tokenizer, self.max_new_tokens = HFEngine(model, tokenizer, precision), tokenizer, max_new_tokens

    def complete(self, messages: Messages) -> str:
        return self.complete_many([messages])[0]

    def complete_many(self, conversations: Sequence[Messages]) -> list[str]:
        """Every conversation decoded in one greedy batch."""
        from agentic_rl.engines.base import SamplingParams

        rows = {}
        for i, messages in enumerate(conversations):
            ids = self.tokenizer.apply_chat_template(list(messages), add_generation_prompt=True, tokenize=True)
            rows[i] = list(ids["input_ids"] if isinstance(ids, Mapping) else ids)
        out = [""] * len(rows)

        def on_stop(row, sample):
            out[row] = sample.text  # None: the row ends here

        if rows:
            self.engine.session(0).run(rows, SamplingParams(0.0, 1.0, self.max_new_tokens), on_stop)
        return out


@dataclass(frozen=True)
class OpenAIJudge:
    """Any OpenAI-compatible `/chat/completions` endpoint. The key is read from `api_key_env` (never
    stored in a recipe)."""

    base_url: str
    model: str
    api_key_env: str = "OPENAI_API_KEY"
    timeout_s: float = 30.0
    max_tokens: int = 256

    concurrency: int = 8  # requests in flight at once for `complete_many`

    def complete_many(self, conversations: Sequence[Messages]) -> list[str | Exception]:
        def one(messages):
            try:
                return self.complete(messages)
            except Exception as e:  # noqa: BLE001 - kept per conversation
                return e

        with ThreadPoolExecutor(max(1, min(self.concurrency, len(conversations)))) as pool:
            return list(pool.map(one, conversations))

    def complete(self, messages: Messages) -> str:
        body = json.dumps({"model": self.model, "messages": list(messages), "temperature": 0.0,
                           "max_tokens": self.max_tokens}).encode()
        headers = {"Content-Type": "application/json"}
        if os.environ.get(self.api_key_env):
            headers["Authorization"] = f"Bearer {os.environ[self.api_key_env]}"
        request = urllib.request.Request(self.base_url.rstrip("/") + "/chat/completions", body, headers)
        with urllib.request.urlopen(request, timeout=self.timeout_s) as response:  # noqa: S310 - the user's endpoint
            return json.loads(response.read())["choices"][0]["message"]["content"]


class CachedJudge:
    """A judge engine whose answers are kept by the prompt's content: the same prompt is asked once."""

    def __init__(self, engine: JudgeEngine, max_items: int = 100_000):
        self.engine, self.max_items = engine, max_items
        self.answers: dict[str, str] = {}
        self.asked = 0  # prompts sent to the engine (the rest came from memory)

    @staticmethod
    def key(messages: Messages) -> str:
        return hashlib.sha256(json.dumps(list(messages), sort_keys=True).encode()).hexdigest()

    def complete(self, messages: Messages) -> str:
        answer = self.complete_many([messages])[0]
        if isinstance(answer, Exception):
            raise answer
        return answer

    def complete_many(self, conversations: Sequence[Messages]) -> list[str | Exception]:
        keys = [self.key(m) for m in conversations]
        todo = {k: m for k, m in zip(keys, conversations) if k not in self.answers}  # each new prompt once
        self.asked += len(todo)
        fresh = dict(zip(todo, complete_many(self.engine, list(todo.values())))) if todo else {}
        for k, answer in fresh.items():
            if not isinstance(answer, Exception) and len(self.answers) < self.max_items:
                self.answers[k] = answer  # a failure is not kept: asked again next time
        return [self.answers[k] if k in self.answers else fresh[k] for k in keys]


def make_judge(model: str, url: str = "", rubric: str = "", whole_episode: bool = False, max_new_tokens: int = 64,
               timeout_s: float = 30.0) -> LLMJudge:
    """A cached judge: `url` an OpenAI-compatible server asked for `model`, else `model` loaded
    here, frozen (any name the loader reads)."""
    if url:
        engine: JudgeEngine = OpenAIJudge(url, model, timeout_s=timeout_s)
    else:
        from agentic_rl.models.loader import load_model

        judge_model, tokenizer = load_model(model)
        judge_model.requires_grad_(False)
        engine = EmbeddedJudge(judge_model, tokenizer, max_new_tokens)
    return LLMJudge(CachedJudge(engine), rubric or DEFAULT_RUBRIC, whole_episode=whole_episode)


@dataclass(frozen=True)
class JudgeComponent:
    """The reward section's `judge` component: the judge's score of each episode of a group."""

    judge: LLMJudge

    def __call__(self, group: TrajectoryGroup, env: Sequence[Score]) -> list[float]:
        return [self.judge(group.task, t).value for t in group.trajectories]

    def prepare(self, groups: Sequence[TrajectoryGroup]) -> None:
        self.judge.prepare(groups)
