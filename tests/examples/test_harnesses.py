"""The harness examples (`examples/`) through the real recording proxy, each driven by its own
framework, with a scripted policy (`engines/scripted.py`) that writes what a trained policy would:
a right tool call or code action, then the answer. What each framework sends back of the policy's
replies decides the rows: a harness that keeps its history whole gives one merged trajectory, exact
to the sampled ids; the reward is the env's (or the example's own) verdict."""

from __future__ import annotations

import shutil

import pytest

from agentic_rl.engines.scripted import ScriptedEngine
from agentic_rl.envs.formats import call_action, get_format
from agentic_rl.envs.registry import get_env
from agentic_rl.registry import load_callable
from agentic_rl.rollout.agents import AgentRollouts
from agentic_rl.trainer.config import load_config
from agentic_rl.trainer.episodes import episodes

EOT = "<|im_end|>"


class Script:
    """The policy's replies, in order: one episode runs at a time, so call k gets reply k."""

    def __init__(self, replies: list[str]):
        self.replies, self.calls = replies, 0

    def __call__(self, row: int, turn: int) -> str:
        self.calls += 1
        return self.replies[min(self.calls, len(self.replies)) - 1]


def rollout(program: str, env: str, replies, tokenizer, overrides=()):
    """One episode of `program` on the first train task of `env`, the policy `replies(task)`."""
    cfg = load_config("recipes/tiny.yaml", [f"env.name={env}", "rollout.max_new_tokens=64", "rollout.max_episode_tokens=256",
                                             *overrides])
    spec = get_env(cfg.env.name)
    (task,) = spec.tasks("train", 1, 0)
    script = Script(replies(task))
    agents = AgentRollouts(load_callable(program), ScriptedEngine(tokenizer, script), tokenizer,
                           episodes(spec, cfg.env.options, cfg.rollout), deadline_s=120, concurrency=1)
    try:
        (group,), _ = agents.rollout([task], 1, seed=0)
    finally:
        agents.close()
    return group.trajectories[0], script


def calculator_replies(task) -> list[str]:
    return [call_action(get_format("hermes"), "calculator", expression=task.meta["expression"]),
            f"The result is <answer>{task.answer}</answer>{EOT}"]


def assert_exact(trajectory, tokenizer, script, contexts: int = 1):
    """No failure, `contexts` contexts, every call recorded, the trained ids exactly the sampled ones."""
    assert trajectory.error is None and trajectory.infra_failure is None
    assert len(trajectory.turns) == script.calls
    assert sum(bool(t.restart) for t in trajectory.turns[1:]) == contexts - 1
    for turn, reply in zip(trajectory.turns, script.replies):
        assert tuple(turn.action_ids) == tuple(tokenizer.encode(turn.action_text, add_special_tokens=False))
        assert reply.startswith(turn.action_text.removesuffix(EOT)) or turn.action_text.startswith(reply)


@pytest.mark.parametrize("program", ["examples/langgraph_react_agent.py:run", "examples/agents_sdk_agent.py:run",
                                     "examples/agents_sdk_agent.py:run_chat"])
def test_tool_calling_harnesses_are_one_merged_trajectory_scored_by_the_verifier(program, tokenizer):
    """LangGraph and the Agents SDK (through the Responses API, its default, and through chat
    completions) send the reply's tool call back as it came (their own JSON, their own call ids) with
    the tool's result: the second call extends the first, one trajectory of two
    turns; the env's verifier scores the final `<answer>` right (1.0)."""
    pytest.importorskip("langgraph" if "langgraph" in program else "agents")
    trajectory, script = rollout(program, "calculator", calculator_replies, tokenizer)
    assert_exact(trajectory, tokenizer, script)
    assert script.calls == 2 and trajectory.reward == 1.0
    assert trajectory.turns[1].obs_ids  # the tool's result, observation tokens between the two replies
    assert "tool_response" in tokenizer.decode(trajectory.turns[1].obs_ids)


def test_smolagents_code_runs_in_the_sandbox_and_the_episode_is_one_trajectory(tokenizer):
    """The CodeAgent's action is Python run by the sandboxed executor (a path of the host is not
    there); `final_answer` ends the run with the computed number, the example's reward 1.0. The
    server honours smolagents' stop `</code>` (the reply comes back without it); smolagents strips the
    reply and appends `</code>` to what it keeps, which is not the sampled text, so the second call
    starts a new context: two contexts, each exact."""
    pytest.importorskip("smolagents")

    def replies(task):
        return ["Thought: compute it, and check the host is out of sight.\n<code>\nimport os\n"
                f"seen = os.path.exists({__file__!r})\nprint('host visible:', seen)\n</code>",
                f"Thought: done.\n<code>\nfinal_answer({task.answer} if not seen else -1)\n</code>"]
    trajectory, script = rollout("examples/smolagents_code_agent.py:run", "calculator", replies, tokenizer)
    assert_exact(trajectory, tokenizer, script, contexts=2)
    assert script.calls == 2 and trajectory.reward == 1.0
    assert "host visible: False" in tokenizer.decode(trajectory.turns[1].obs_ids)


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")
def test_mini_swe_agent_fixes_the_repository_in_the_sandbox_and_the_tests_judge_it(tokenizer):
    """mini-swe-agent runs the policy's shell commands on the episode's copy: a look at the file,
    a Python edit that undoes the instance's bug, then the submit command. The example scores the
    changed files by the env's FAIL_TO_PASS and PASS_TO_PASS tests: resolved, 1.0. Every reply has
    exactly one action, so mini-swe-agent keeps each: one trajectory of three turns."""
    pytest.importorskip("minisweagent")
    from agentic_rl.data.swe_instances import instance_of

    def replies(task):
        m = instance_of(task).mutation
        fix = (f"python3 - <<'PY'\nimport pathlib\np = pathlib.Path({m.file!r})\n"
               f"p.write_text(p.read_text().replace({m.after!r}, {m.before!r}, 1))\nPY")
        return [f"THOUGHT: look.\n\n```mswea_bash_command\nhead -3 {m.file}\n```{EOT}",
                f"THOUGHT: fix.\n\n```mswea_bash_command\n{fix}\n```{EOT}",
                f"THOUGHT: done.\n\n```mswea_bash_command\necho COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\n```{EOT}"]
    trajectory, script = rollout("examples/mini_swe_agent.py:run", "swe_repair", replies, tokenizer,
                                 ["rollout.max_new_tokens=2048", "rollout.max_episode_tokens=8192", "rollout.max_turns=8"])
    assert_exact(trajectory, tokenizer, script)
    assert script.calls == 3 and trajectory.reward == 1.0
    assert "<returncode>0</returncode>" in tokenizer.decode(trajectory.turns[2].obs_ids)
