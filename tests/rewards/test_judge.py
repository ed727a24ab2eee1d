"""LLM-as-judge: robust score parsing, an OpenAI-compatible endpoint (a real HTTP server on the
host's loopback), the embedded model, and failures recorded as errors, never as silent zeros."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from agentic_rl.rewards.judge import (
    CachedJudge,
    EmbeddedJudge,
    JudgeError,
    JudgeTurns,
    LLMJudge,
    OpenAIJudge,
    parse_score,
)
from agentic_rl.rewards.scoring import score_trajectory


@pytest.mark.parametrize(("text", "value"), [
    ('{"score": 7}', 0.7),
    ("The answer is right.\nScore: 9/10", 0.9),
    ("**Score:** 10", 1.0),
    ("I'd give it 3 out of 10.", 0.3),
    ("Reasoning mentions 2 steps. Score: 6", 0.6),  # the score, not the first number
    ("5", 0.5),
    ("Score: 11", None),  # out of range
    ("looks good", None),
    ('{"score": "high"}', None),
])
def test_parse_score(text, value):
    got = parse_score(text, 10)
    assert got == (pytest.approx(value) if value is not None else None)


class _Server:
    """A minimal OpenAI-compatible endpoint: replies with `reply`, records the requests."""

    def __init__(self, reply: str):
        outer = self
        self.requests = []

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - the http.server API
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append((self.path, dict(self.headers), body))
                data = json.dumps({"choices": [{"message": {"role": "assistant", "content": reply}}]}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.httpd = HTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_port}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()


def test_openai_compatible_endpoint(episode, monkeypatch):
    server = _Server("Correct.\nScore: 8")
    monkeypatch.setenv("JUDGE_KEY", "sk-test")
    try:
        judge = LLMJudge(OpenAIJudge(server.url, "judge-model", api_key_env="JUDGE_KEY"))
        t = episode("<answer>12</answer>")
        s = judge(t.task, t)
    finally:
        server.close()
    assert s.value == pytest.approx(0.8) and s.error is None
    path, headers, body = server.requests[0]
    assert path == "/v1/chat/completions" and headers["Authorization"] == "Bearer sk-test"
    assert body["model"] == "judge-model" and "Reference answer: 12" in body["messages"][1]["content"]


def test_a_judge_that_cannot_grade_is_the_machines_failure_never_a_zero(episode):
    """Down, or answering without a score: `JudgeError`, and scoring marks the episode an
    infrastructure failure of kind judge (it leaves the loss) instead of a reward of 0."""
    t = episode("<answer>12</answer>")
    with pytest.raises(JudgeError, match="judge failed: URLError"):
        LLMJudge(OpenAIJudge("http://127.0.0.1:9/v1", "m", timeout_s=2))(t.task, t)  # nothing listens on port 9
    server = _Server("I cannot grade this.")
    try:
        with pytest.raises(JudgeError, match="judge wrote no score"):
            LLMJudge(OpenAIJudge(server.url, "m"))(t.task, t)
    finally:
        server.close()
    scored = score_trajectory(LLMJudge(OpenAIJudge("http://127.0.0.1:9/v1", "m", timeout_s=2)), t)
    assert scored.infra_failure == "judge" and scored.error.startswith("reward failed: JudgeError")


class _Counting:
    """A judge engine that answers 'Score: 7' and counts what it was asked, batch by batch."""

    def __init__(self, fail_on: str = ""):
        self.batches, self.fail_on = [], fail_on

    def complete_many(self, conversations):
        self.batches.append(len(conversations))
        return [RuntimeError("down") if self.fail_on and self.fail_on in c[-1]["content"] else "Score: 7"
                for c in conversations]


def test_a_step_is_graded_in_one_batch_and_each_prompt_once(episode):
    """`score_groups` lets the judge grade the whole step first (one batch of 4); the scoring after
    it, episode by episode, is answered from the cache: the engine saw each prompt once."""
    from agentic_rl.rewards.scoring import score_groups
    from agentic_rl.types import TrajectoryGroup

    engine = _Counting()
    judge = LLMJudge(CachedJudge(engine))
    a, b = episode("<answer>12</answer>"), episode("<answer>13</answer>")
    groups = [TrajectoryGroup(a.task, (a, b)), TrajectoryGroup(b.task, (b, a))]
    scored = score_groups(judge, groups)
    assert engine.batches == [2] and judge.engine.asked == 2  # two distinct prompts among the four episodes
    assert [t.reward for g in scored for t in g.trajectories] == [pytest.approx(0.7)] * 4


def test_a_failed_answer_is_not_cached_and_costs_only_its_episode(episode):
    from agentic_rl.rewards.scoring import score_groups
    from agentic_rl.types import TrajectoryGroup

    engine = _Counting(fail_on="<answer>13</answer>")
    a, b = episode("<answer>12</answer>"), episode("<answer>13</answer>")
    scored = score_groups(LLMJudge(CachedJudge(engine)), [TrajectoryGroup(a.task, (a, b))])
    assert [t.infra_failure for t in scored[0].trajectories] == [None, "judge"]
    assert engine.batches == [2, 1, 1]  # the step's batch; b asked again, twice (a reward is tried twice)


def test_judge_turns_as_process_rewards(episode):
    server = _Server("Score: 10")
    try:
        rewards = JudgeTurns(LLMJudge(OpenAIJudge(server.url, "m")), weight=0.2)(episode("call", "<answer>1</answer>"))
    finally:
        server.close()
    assert rewards == [pytest.approx(0.1), pytest.approx(0.1)]  # 0.2 x (1.0 - 0.5) per turn


def test_the_embedded_model_as_judge(tiny, tokenizer, episode):
    """A real local model answers the rubric prompt, a batch of prompts decoded together; the tiny
    random one writes noise, so each answer is a parsed score or a `JudgeError` — never a zero."""
    t = episode("<answer>12</answer>")
    judge = EmbeddedJudge(tiny, tokenizer, max_new_tokens=8, precision="fp32")
    prompts = [LLMJudge(judge).messages(t.task, r) for r in ("12", "13", "14")]
    answers = judge.complete_many(prompts)
    assert len(answers) == 3 and all(isinstance(a, str) for a in answers)
    assert answers[0] == judge.complete(prompts[0])  # greedy: a row decodes alone as in its batch
    try:
        s = LLMJudge(judge)(t.task, t)
        assert 0 <= s.value <= 1
    except JudgeError:
        pass
