"""SFT data files: OpenAI-style conversations and our trajectory records become trajectories with
the rollout's masks (assistant actions only), and bad lines are reported with their number."""

from __future__ import annotations

import json

import pytest

from agentic_rl.envs.formats import HERMES
from agentic_rl.monitor.trajectories import read_episodes, write_trajectories
from agentic_rl.rollout.sft_data import load_sft_file
from agentic_rl.tools import calculator, function_schema
from agentic_rl.types import Task, ToolCall, Trajectory, Turn

TOOLS = [function_schema(calculator)]
CONVERSATION = [
    {"role": "system", "content": "Use the calculator."},
    {"role": "user", "content": "What is 6 * 7?"},
    {"role": "assistant", "content": "Let me compute.", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "calculator", "arguments": '{"expression": "6 * 7"}'}}]},
    {"role": "tool", "tool_call_id": "c1", "content": "42"},
    {"role": "assistant", "content": "<answer>42</answer>"},
    {"role": "user", "content": "And doubled?"},
    {"role": "assistant", "content": "<answer>84</answer>"},
]


def test_multi_turn_conversation_masks_exactly_the_assistant_text(tmp_path, tokenizer):
    path = tmp_path / "chat.jsonl"
    path.write_text(json.dumps({"messages": CONVERSATION, "tools": TOOLS}) + "\n")
    [traj] = load_sft_file(path, HERMES, tokenizer)
    ids, mask = traj.token_ids(), traj.loss_mask()
    # the whole sequence is the chat template's render of the conversation
    rendered = tokenizer.apply_chat_template(CONVERSATION, tools=TOOLS, tokenize=False)
    assert tokenizer.decode(ids) + "\n" == rendered
    trained = tokenizer.decode([t for t, m in zip(ids, mask) if m])
    call = '\n<tool_call>\n{"name": "calculator", "arguments": {"expression": "6 * 7"}}\n</tool_call>'
    assert trained == "Let me compute." + call + "<answer>42</answer><|im_end|><answer>84</answer><|im_end|>"
    untrained = tokenizer.decode([t for t, m in zip(ids, mask) if not m])
    assert "And doubled?" in untrained and "<tool_response>\n42\n</tool_response>" in untrained
    assert [t.observation for t in traj.turns] == ["42", "", ""]


def test_weight_zero_keeps_a_message_in_the_sequence_but_out_of_the_loss(tmp_path, tokenizer):
    # OpenAI's fine-tuning convention: an assistant message with "weight": 0 is context, not a target.
    conversation = [{**m, "weight": 0} if m["content"] == "<answer>42</answer>" else m for m in CONVERSATION]
    path = tmp_path / "chat.jsonl"
    path.write_text(json.dumps({"messages": conversation, "tools": TOOLS}) + "\n")
    [traj] = load_sft_file(path, HERMES, tokenizer)
    ids, mask = traj.token_ids(), traj.loss_mask()
    assert tokenizer.decode(ids) + "\n" == tokenizer.apply_chat_template(CONVERSATION, tools=TOOLS, tokenize=False)
    trained = tokenizer.decode([t for t, m in zip(ids, mask) if m])
    call = '\n<tool_call>\n{"name": "calculator", "arguments": {"expression": "6 * 7"}}\n</tool_call>'
    assert trained == "Let me compute." + call + "<answer>84</answer><|im_end|>"
    assert [t.trained for t in traj.turns] == [True, False, True]


def test_trajectory_records_round_trip_and_rejection_sampling(tmp_path, tokenizer):
    chat = tmp_path / "chat.jsonl"
    chat.write_text(json.dumps({"messages": CONVERSATION[:5], "tools": TOOLS}) + "\n")
    [traj] = load_sft_file(chat, HERMES, tokenizer)
    import dataclasses

    records = tmp_path / "rl.jsonl"
    write_trajectories(records, [traj, dataclasses.replace(traj, reward=0.1)], tokenizer)
    kept = load_sft_file(records, HERMES, tokenizer, min_reward=1.0)
    assert len(kept) == 1 and kept[0].token_ids() == traj.token_ids() and kept[0].loss_mask() == traj.loss_mask()
    assert len(load_sft_file(records, HERMES, tokenizer, min_reward=0.0)) == 2


def test_a_trajectory_read_back_is_the_trajectory_written(tmp_path, tokenizer):
    """Every field of an episode survives its file (the SFT source, `read_episodes`): a restart moves
    the context cut (`segment_ids`), an infra failure zeroes the loss mask, a version is what the
    partial-rollout staleness is computed from; logprobs are written to 5 decimals, so these have 5."""
    task = Task("t1", "q", "42", {"split": "train"})
    turns = (Turn((1, 2), (3, 4), (-0.5, -0.25), "a", "stop", observation="o", restart=True, version=3,
                  tool_calls=(ToolCall("calculator", {"expression": "6*7"}),), malformed_calls=1, tool_errors=2),
             Turn((5,), (6,), (-0.125,), "b", "eos", reward=0.5, trained=False, restart=True, version=4))
    written = [Trajectory(task, turns, reward=1.0, reward_details={"format": 1.0}, terminated=True),
               Trajectory(task, turns[:1], truncated=True, error="boom", infra_failure="env_step")]
    write_trajectories(tmp_path / "trajectories" / "step_1.jsonl", written, tokenizer)
    read = read_episodes(tmp_path, with_errors=True)
    assert read == written
    assert read[0].segment_ids() == [0] * 4 + [1] * 2 and read[1].loss_mask() == [0, 0, 0, 0]


@pytest.mark.parametrize(("line", "message"), [
    ("not json", r"bad.jsonl:2: "),
    ('{"messages": [{"role": "robot", "content": "x"}]}', r"bad.jsonl:2: message 0: unknown role 'robot'"),
    ('{"messages": [{"role": "user", "content": "q"}]}', r"bad.jsonl:2: the conversation has no assistant"),
    ('{"text": "x"}', r"bad.jsonl:2: expected 'messages'"),
])
def test_bad_lines_name_their_number(tmp_path, tokenizer, line, message):
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps({"messages": CONVERSATION[:5]}) + "\n" + line + "\n")
    with pytest.raises(ValueError, match=message):
        load_sft_file(path, HERMES, tokenizer)


def test_teacher_demonstrations_keep_what_the_verifier_accepts(tokenizer):
    """The teacher answers every task either right (its demonstration) or wrong; only the right
    episodes survive, with the tokens the teacher produced."""
    from agentic_rl.engines.base import SamplingParams
    from agentic_rl.engines.scripted import ScriptedEngine
    from agentic_rl.envs.registry import get_env
    from agentic_rl.rollout.backends import Episodes
    from agentic_rl.rollout.demos import demonstrate
    from agentic_rl.rollout.loop import Budget
    from agentic_rl.rollout.sft_data import teacher_demonstrations

    spec = get_env("calculator")
    tasks = spec.tasks("train", 3, 0)
    fmt = spec.make_env({}).format
    demos = [[fmt.render_assistant_body(m) for m in demonstrate(spec, {}, t, tokenizer)[0] if m["role"] == "assistant"]
             for t in tasks]

    def script(row, turn):  # rows 0, 2, 4 solve their task (samples=2 per task), rows 1, 3, 5 answer -1
        actions = demos[row // 2] if row % 2 == 0 else ["<answer>-1</answer>"]
        return actions[min(turn, len(actions) - 1)] + (tokenizer.eos_token if turn >= len(actions) - 1 else "")

    episodes = Episodes(lambda: spec.make_env({}), spec.make_reward({}), SamplingParams(1.0, 1.0, 256, fmt.stop_strings),
                        Budget(6, 256, 1024))
    kept = teacher_demonstrations(ScriptedEngine(tokenizer, script), tokenizer, episodes, tasks, 2)
    assert len(kept) == 3 and all(t.reward == 1.0 for t in kept)
    assert [t.task.id for t in kept] == [t.id for t in tasks]
