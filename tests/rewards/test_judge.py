"""LLM-as-judge: robust score parsing, an OpenAI-compatible endpoint (a real HTTP server on the
host's loopback), the embedded model, and failures recorded as errors, never as silent zeros."""

from __future__ import annotations

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


def test_openai_compatible_endpoint(episode, monkeypatch, judge_server):
    server = judge_server("Correct.\nScore: 8")
    monkeypatch.setenv("JUDGE_KEY", "sk-test")
    judge = LLMJudge(OpenAIJudge(server.url, "judge-model", api_key_env="JUDGE_KEY"))
    t = episode("<answer>12</answer>")
    s = judge(t.task, t)
    assert s.value == pytest.approx(0.8) and s.error is None
    path, headers, body = server.requests[0]
    assert path == "/v1/chat/completions" and headers["Authorization"] == "Bearer sk-test"
    assert body["model"] == "judge-model" and "Reference answer: 12" in body["messages"][1]["content"]


def test_a_judge_that_cannot_grade_is_the_machines_failure_never_a_zero(episode, judge_server):
    """Down, or answering without a score: `JudgeError`, and scoring marks the episode an
    infrastructure failure of kind judge (it leaves the loss) instead of a reward of 0."""
    t = episode("<answer>12</answer>")
    with pytest.raises(JudgeError, match="judge failed: URLError"):
        LLMJudge(OpenAIJudge("http://127.0.0.1:9/v1", "m", timeout_s=2))(t.task, t)  # nothing listens on port 9
    with pytest.raises(JudgeError, match="judge wrote no score"):
        LLMJudge(OpenAIJudge(judge_server("I cannot grade this.").url, "m"))(t.task, t)
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


def test_judge_turns_as_process_rewards(episode, judge_server):
    rewards = JudgeTurns(LLMJudge(OpenAIJudge(judge_server("Score: 10").url, "m")), weight=0.2)(
        episode("call", "<answer>1</answer>"))
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


def test_the_reward_section_composes_a_judge_and_the_judge_grades_turns(episode, judge_server):
    """`reward.judge.url` and a `judge` component gated on the outcome: the solved episode gets
    outcome + 0.5 x 0.8, the failed one nothing from the judge; `rl.algorithm.process_reward: judge`
    grades each turn with the same judge; a judge component or process reward without a judge is
    refused at load."""
    from agentic_rl.envs.registry import resolve_env
    from agentic_rl.rewards.process import process_reward
    from agentic_rl.rewards.scoring import score_groups
    from agentic_rl.trainer.checks import check_config
    from agentic_rl.trainer.config import ConfigError, load_config
    from agentic_rl.trainer.episodes import episodes
    from agentic_rl.types import TrajectoryGroup

    url = judge_server("Score: 8").url
    section = ["reward.components=[{name: outcome}, {name: judge, weight: 0.5, gate: outcome}]",
               f"reward.judge.url={url}", "reward.judge.model=m"]
    cfg = load_config("recipes/tiny.yaml", [*section, "rl.algorithm.process_reward=judge"])
    check_config(cfg)
    eps = episodes(resolve_env("calculator", {}), {}, cfg.rollout, reward=cfg.reward, policy=cfg.model.name)
    right, wrong = episode("<answer>12</answer>"), episode("<answer>7</answer>")
    scored = score_groups(eps.reward, [TrajectoryGroup(right.task, (right, wrong))])[0].trajectories
    assert [t.reward_details["judge"] for t in scored] == [pytest.approx(0.8)] * 2
    assert scored[0].reward == pytest.approx(scored[0].reward_details["outcome"] + 0.4) and scored[1].reward < 0.5
    assert process_reward("judge", eps.judge, 0.2)(right) == [pytest.approx(0.06)]  # 0.2 x (0.8 - 0.5)
    with pytest.raises(ConfigError, match="judge needs reward.judge"):
        check_config(load_config("recipes/tiny.yaml", [section[0]]))
    with pytest.raises(ConfigError, match="process reward 'judge' needs reward.judge"):
        check_config(load_config("recipes/tiny.yaml", ["rl.algorithm.process_reward=judge"]))
