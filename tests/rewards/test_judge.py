"""LLM-as-judge: robust score parsing, an OpenAI-compatible endpoint (a real HTTP server on the
host's loopback), the embedded model, and failures recorded as errors, never as silent zeros."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from agentic_rl.rewards.judge import EmbeddedJudge, JudgeTurns, LLMJudge, OpenAIJudge, parse_score
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


def test_failures_are_recorded_errors(episode):
    t = episode("<answer>12</answer>")
    down = LLMJudge(OpenAIJudge("http://127.0.0.1:9/v1", "m", timeout_s=2))(t.task, t)  # nothing listens on port 9
    assert down.error and down.details["judge_error"] == 1.0
    server = _Server("I cannot grade this.")
    try:
        vague = LLMJudge(OpenAIJudge(server.url, "m"))(t.task, t)
    finally:
        server.close()
    assert vague.error.startswith("judge wrote no score")
    scored = score_trajectory(LLMJudge(OpenAIJudge("http://127.0.0.1:9/v1", "m", timeout_s=2)), t)
    assert scored.reward_details["reward_error"] == 1.0 and scored.error.startswith("reward: judge failed")


def test_judge_turns_as_process_rewards(episode):
    server = _Server("Score: 10")
    try:
        rewards = JudgeTurns(LLMJudge(OpenAIJudge(server.url, "m")), weight=0.2)(episode("call", "<answer>1</answer>"))
    finally:
        server.close()
    assert rewards == [pytest.approx(0.1), pytest.approx(0.1)]  # 0.2 x (1.0 - 0.5) per turn


def test_the_embedded_model_as_judge(tiny, tokenizer, episode):
    """A real local model answers the rubric prompt; the tiny random one writes noise, so the result
    is a recorded error or a parsed score — never an exception."""
    t = episode("<answer>12</answer>")
    s = LLMJudge(EmbeddedJudge(tiny, tokenizer, max_new_tokens=8, precision="fp32"))(t.task, t)
    assert (s.error is not None and s.details["judge_error"] == 1.0) or 0 <= s.value <= 1
