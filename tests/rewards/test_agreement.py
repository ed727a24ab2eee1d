"""A judge's agreement with the verifier (`rewards/agreement.py`, `agentic-rl judge-agreement`): the
statistics against hand-derived values, the verdicts of a scripted judge counted cell by cell, and
the command on a real trajectory file."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentic_rl.cli import main
from agentic_rl.errors import UserFileError
from agentic_rl.models.loader import load_tokenizer
from agentic_rl.monitor.trajectories import read_episodes, write_trajectories
from agentic_rl.rewards.agreement import (
    agreement,
    cohen_kappa,
    judge_agreement,
    wilson_interval,
)
from agentic_rl.rewards.judge import LLMJudge
from agentic_rl.types import Task, Trajectory, Turn


def test_kappa_of_a_textbook_table():
    """50 items: both yes 20, both no 15, A yes / B no 5, A no / B yes 10. p_o = 35/50 = 0.7; A says
    yes 25/50 = 0.5, B 30/50 = 0.6, so p_e = 0.5*0.6 + 0.5*0.4 = 0.5 and kappa = (0.7-0.5)/(1-0.5) = 0.4."""
    a = [True] * 20 + [False] * 15 + [True] * 5 + [False] * 10
    b = [True] * 20 + [False] * 15 + [False] * 5 + [True] * 10
    assert cohen_kappa(a, b) == pytest.approx(0.4, abs=1e-12)
    assert cohen_kappa(a, a) == 1.0 and cohen_kappa(a, [not x for x in a]) < 0


@given(st.lists(st.tuples(st.booleans(), st.booleans()), min_size=1, max_size=60))
@settings(deadline=None)  # scikit-learn's first call loads the library
def test_kappa_matches_scikit_learn(pairs):
    """Invariant: the same value as scikit-learn's `cohen_kappa_score` wherever that one is defined
    (it is NaN when both raters give one same label throughout; ours calls that full agreement)."""
    sklearn = pytest.importorskip("sklearn.metrics")
    a, b = [p[0] for p in pairs], [p[1] for p in pairs]
    if len(set(a) | set(b)) == 1:
        assert cohen_kappa(a, b) == 1.0
        return
    assert cohen_kappa(a, b) == pytest.approx(sklearn.cohen_kappa_score(a, b), abs=1e-9)


def test_wilson_interval_of_8_in_10():
    """p = 0.8, n = 10, z = 1.96: centre (0.8 + 0.19208) / 1.38416 = 0.71674; half-width
    1.96 * sqrt(0.016 + 0.009604) / 1.38416 = 0.22658; so [0.4902, 0.9433] (the published value)."""
    lo, hi = wilson_interval(8, 10)
    assert (round(lo, 4), round(hi, 4)) == (0.4902, 0.9433)
    assert wilson_interval(0, 0) == (0.0, 1.0) and wilson_interval(10, 10)[1] == 1.0


class _Grader:
    """A judge that passes a response holding the task's answer; it fails outright on task 'down'."""

    def complete(self, messages):
        text = messages[-1]["content"]
        if "Task: down" in text:
            raise TimeoutError("judge timed out")
        answer = text.split("Reference answer: ")[1].split("\n")[0]
        response = text.split("Response:\n")[1].split("\n\nRubric")[0]
        return "Score: 10" if answer in response else "Score: 2"


def _episode(prompt: str, answer: str, text: str, reward: float) -> Trajectory:
    return Trajectory(Task(prompt, prompt, answer), (Turn((1, 2), (3,), (-0.5,), text, "eos"),), reward=reward)


def test_each_verdict_lands_in_its_cell_and_an_outage_is_no_verdict():
    episodes = [
        _episode("a", "12", "the answer is 12", 1.0),  # both pass
        _episode("b", "7", "it is 9", 0.0),  # both fail
        _episode("c", "5", "5, by guessing", 0.0),  # judge passes what the verifier fails
        _episode("d", "30", "thirty", 1.0),  # the verifier passes, the judge does not
        _episode("down", "1", "1", 1.0),  # the judge is down: left out
    ]
    got = judge_agreement(LLMJudge(_Grader()), episodes)
    assert (got.both_pass, got.both_fail, got.judge_only, got.verifier_only) == (1, 1, 1, 1)
    assert got.episodes == 4 and got.judge_failures == 1 and got.accuracy == 0.5
    assert got.kappa == pytest.approx(0.0)  # both pass half: chance agreement is 0.5, observed 0.5
    assert got == agreement([True, False, True, False], [True, False, False, True], failures=1)


def test_episodes_come_from_a_run_folders_trajectory_files(tmp_path):
    """`monitor.trajectories.read_episodes`, which the command reads with: errors left out unless asked."""
    tokenizer = load_tokenizer("tiny")
    ok, failed = _episode("a", "12", "12", 1.0), _episode("b", "3", "4", 0.0)
    errored = Trajectory(ok.task, ok.turns, reward=0.0, error="env crashed")
    write_trajectories(tmp_path / "trajectories" / "rl.jsonl", [ok, errored, failed], tokenizer)
    got = read_episodes(tmp_path)
    assert [(t.task.id, t.reward, t.final_text) for t in got] == [("a", 1.0, "12"), ("b", 0.0, "4")]
    assert len(read_episodes(tmp_path, limit=1)) == 1 and len(read_episodes(tmp_path, with_errors=True)) == 3
    (tmp_path / "bad.jsonl").write_text('{"task_id": "x"}\n')
    with pytest.raises(UserFileError, match="bad.jsonl:1: not a trajectory record"):
        read_episodes(tmp_path / "bad.jsonl")
    with pytest.raises(UserFileError, match="no trajectory files"):
        read_episodes(tmp_path / "nowhere")


def test_the_command_writes_the_agreement_of_a_local_judge(tmp_path, capsys):
    """The tiny random model as the judge writes no score: every episode is a judge failure, counted
    apart (the command's wiring, end to end; what a real judge measures is on docs/rewards.md)."""
    write_trajectories(tmp_path / "trajectories" / "rl.jsonl", [_episode("a", "12", "12", 1.0)], load_tokenizer("tiny"))
    assert main(["judge-agreement", str(tmp_path), "--judge", "tiny"]) == 0
    written = json.loads((tmp_path / "judge_agreement.json").read_text())
    assert written["judge"] == "tiny" and written["episodes"] + written["judge_failures"] == 1
    assert "kappa" in capsys.readouterr().out
    assert main(["judge-agreement", str(tmp_path / "missing")]) == 2
