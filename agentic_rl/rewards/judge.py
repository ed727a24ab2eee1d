"""LLM-as-judge: a rubric prompt answered by any chat model, parsed into a score in [0, 1].

The judge is an `engine` with one method, `complete(messages) -> str`: the embedded model
(`EmbeddedJudge`, any local HF model with a chat template), or any OpenAI-compatible server
(`OpenAIJudge`: vLLM, llama.cpp, an API). A judge that fails — it raises, times out, or writes no
parsable score — yields `Score(0, {"judge_error": 1}, error=...)`: the episode keeps its data, the
error is counted in the metrics, and it is never mistaken for a real zero.
"""

from __future__ import annotations

import json
import os
import re
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from agentic_rl.rewards.base import Score
from agentic_rl.types import Task, Trajectory

DEFAULT_RUBRIC = ("Judge whether the response answers the question correctly and completely. "
                  "Give 10 for a fully correct answer, 0 for a wrong or missing one.")
_SYSTEM = "You are a strict, fair grader. Read the task and the response, then grade it."


class JudgeEngine(Protocol):
    def complete(self, messages: Sequence[Mapping[str, str]]) -> str: ...


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
        response = ("\n".join(t.action_text for t in trajectory.turns) if self.whole_episode
                    else trajectory.final_text)
        return self.grade(task, response)

    def grade(self, task: Task, response: str, context: str = "") -> Score:
        reference = f"\nReference answer: {task.answer}" if task.answer is not None else ""
        prompt = (f"Task: {task.prompt}{reference}\n{context}\nResponse:\n{response}\n\nRubric: {self.rubric}\n"
                  f"End with a line 'Score: N' where N is from 0 to {self.scale:g}.")
        try:
            text = self.engine.complete([{"role": "system", "content": _SYSTEM}, {"role": "user", "content": prompt}])
        except Exception as e:  # noqa: BLE001 - a judge outage is recorded per episode, never a crash
            return Score(0.0, {"judge_error": 1.0}, error=f"judge failed: {type(e).__name__}: {e}")
        value = parse_score(text, self.scale)
        if value is None:
            return Score(0.0, {"judge_error": 1.0}, error=f"judge wrote no score: {text[:200]!r}")
        return Score(value, {"judge_score": value, "judge_error": 0.0})


@dataclass(frozen=True)
class JudgeTurns:
    """A process reward: the judge grades each turn (its action, with the observation it got) in the
    context of the task; turn reward = weight x (score - 0.5), so an average step is neutral. A turn
    the judge cannot grade gets 0."""

    judge: LLMJudge
    weight: float = 0.2

    def __call__(self, trajectory: Trajectory) -> list[float]:
        rewards = []
        for k, turn in enumerate(trajectory.turns):
            context = f"This is step {k + 1} of the response; the tool returned: {turn.observation[:500]!r}"
            s = self.judge.grade(trajectory.task, turn.action_text, context)
            rewards.append(0.0 if s.error else self.weight * (s.value - 0.5))
        return rewards


class EmbeddedJudge:
    """A local chat model as judge, greedy, through the embedded engine."""

    def __init__(self, model, tokenizer, max_new_tokens: int = 64, precision: str = "auto"):
        from agentic_rl.engines.hf import HFEngine

        self.engine, self.tokenizer, self.max_new_tokens = HFEngine(model, tokenizer, precision), tokenizer, max_new_tokens

    def complete(self, messages: Sequence[Mapping[str, str]]) -> str:
        from agentic_rl.engines.base import SamplingParams

        ids = self.tokenizer.apply_chat_template(list(messages), add_generation_prompt=True, tokenize=True)
        ids = ids["input_ids"] if isinstance(ids, Mapping) else ids
        out: list[str] = []
        self.engine.session(0).run({0: list(ids)}, SamplingParams(0.0, 1.0, self.max_new_tokens),
                                   lambda row, sample: out.append(sample.text))
        return out[0] if out else ""


@dataclass(frozen=True)
class OpenAIJudge:
    """Any OpenAI-compatible `/chat/completions` endpoint. The key is read from `api_key_env` (never
    stored in a recipe)."""

    base_url: str
    model: str
    api_key_env: str = "OPENAI_API_KEY"
    timeout_s: float = 30.0
    max_tokens: int = 256

    def complete(self, messages: Sequence[Mapping[str, str]]) -> str:
        body = json.dumps({"model": self.model, "messages": list(messages), "temperature": 0.0,
                           "max_tokens": self.max_tokens}).encode()
        headers = {"Content-Type": "application/json"}
        if os.environ.get(self.api_key_env):
            headers["Authorization"] = f"Bearer {os.environ[self.api_key_env]}"
        request = urllib.request.Request(self.base_url.rstrip("/") + "/chat/completions", body, headers)
        with urllib.request.urlopen(request, timeout=self.timeout_s) as response:  # noqa: S310 - the user's endpoint
            return json.loads(response.read())["choices"][0]["message"]["content"]
