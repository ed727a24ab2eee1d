"""Fuzzed actions through the real rollout loop, env, tools and reward: zero crashes.

The invariant: whatever text a policy writes — broken tool-call tags, malformed JSON, unknown tools,
hostile code, control characters, huge numbers — every episode comes back as a trajectory whose
training tokens line up with its mask, is scored, and serializes to the trajectory file; nothing
escapes the loop as an exception. Actions are built from the protocol's own fragments (so tool
calls are often nearly right, which is where parsers break) mixed with arbitrary text.

CI runs a few hundred actions per env; `make test-slow` runs over 10,000 per env.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentic_rl.engines.base import SamplingParams
from agentic_rl.engines.scripted import ScriptedEngine
from agentic_rl.envs.registry import get_env
from agentic_rl.monitor.trajectories import trajectory_record
from agentic_rl.rewards.scoring import score_groups
from agentic_rl.rollout.loop import Budget, rollout

FRAGMENTS = [
    "<tool_call>", "</tool_call>", '{"name": "calculator", "arguments": {"expression": "', '"}}', "{", "}", '"',
    '{"name": "python", "arguments": {"code": "', '{"name": "nope", "arguments": []}', "null", "[", "]", ":", ",",
    "<answer>", "</answer>", "<search>", "</search>", "<code>", "</code>", "```python\n", "```", "<interpreter>",
    "2+2", "1/0", "9" * 400, "**", "(" * 50, "import os\nos.system('id')\n", "while True: pass\n", "print(1)\n",
    "open('/etc/passwd').read()", "\x00", "\ufffd", "🙂", "\n", " ", "<|im_end|>", "<|im_start|>", "\\u0000",
    "Alan Turing", "tool_calls", "function",
]
ACTION = st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=12)), max_size=12).map("".join)
ENVS = {"calculator": {}, "calculator-openai": {"format": "openai"}, "retool": {"timeout_s": 0.5},
        "search_r1": {}}


def _play(name: str, tokenizer, actions: list[list[str]]) -> int:
    """One episode per row of `actions` (one action per turn), through rollout and scoring; returns
    how many episodes came back checked."""
    env_name = name.split("-")[0]
    spec, options = get_env(env_name), ENVS[name]
    tasks = spec.tasks("train", len(actions), 0)
    engine = ScriptedEngine(tokenizer, lambda row, turn: actions[row][min(turn, len(actions[row]) - 1)])
    params = SamplingParams(1.0, 1.0, 64, spec.make_env(options).format.stop_strings)
    groups, _ = rollout(engine, lambda: spec.make_env(options), tasks, 1, params,
                        Budget(3, 64, 160, step_timeout_s=10))
    groups = score_groups(spec.make_reward(options), groups, timeout_s=10)
    assert len(groups) == len(actions)
    for g in groups:
        t = g.trajectories[0]
        assert len(t.token_ids()) == len(t.loss_mask()) and t.turns
        assert isinstance(t.reward, float)
        json.dumps(trajectory_record(t, tokenizer))
    return len(groups)


def _fuzz(name: str, tokenizer, examples: int) -> int:
    """Runs `examples` hypothesis examples of `_play`; returns how many episodes were checked, so
    a test can tell a fuzz that ran from one that drew nothing (each example has >= 1 episode)."""
    played = [0]

    @settings(max_examples=examples, deadline=None, derandomize=True,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(st.lists(st.lists(ACTION, min_size=1, max_size=3), min_size=1, max_size=8))
    def check(actions):
        played[0] += _play(name, tokenizer, actions)

    check()
    return played[0]


@pytest.mark.parametrize("name", list(ENVS))
def test_fuzzed_actions_never_crash_the_loop(name, tokenizer):
    # ~60 x 4.5 rows x 2 turns: several hundred actions per env
    assert _fuzz(name, tokenizer, 60) >= 60


@pytest.mark.slow
@pytest.mark.parametrize("name", list(ENVS))
def test_fuzzed_actions_never_crash_the_loop_10k(name, tokenizer):
    # 2,500 x ~4.5 rows x ~2 turns: over 10,000 actions per env
    assert _fuzz(name, tokenizer, 2500) >= 2500
