"""The BFCL env: the reward on hand-made right and wrong calls agrees with bfcl-eval's own checker,
the demonstrations score 1 on every training task, no call is right on irrelevance entries, calls
are recorded and never run, splits hold questions apart, and check-env through the real rollout loop."""

from __future__ import annotations

import subprocess
import sys

import pytest

from agentic_rl.data import bfcl_tasks as data
from agentic_rl.envs.formats import call_action
from agentic_rl.envs.registry import get_env
from agentic_rl.rewards.bfcl import checker_module
from agentic_rl.rollout.conformance import check_env
from agentic_rl.types import Trajectory, Turn

SPEC = get_env("bfcl")
REWARD = SPEC.make_reward({})


def _entry(bfcl_id: str):
    category = bfcl_id.rsplit("_", 1)[0]
    for split in ("train", "heldout_in", "heldout_out"):
        found = [t for t in data.pool(split, (category,))[category] if t.meta["bfcl_id"] == bfcl_id]
        if found:
            return found[0]
    raise LookupError(bfcl_id)


def _play(task, actions: list[str]) -> Trajectory:
    """The actions through the env (its parse and its notes), ending with a reply without a call."""
    env = SPEC.make_env({})
    env.reset(task)
    turns = []
    for text in [*actions, "Done."]:
        r = env.step(text)
        turns.append(Turn((), (1,), (0.0,), text, "stop", tool_calls=r.tool_calls, malformed_calls=r.malformed_calls,
                          tool_errors=r.tool_errors))
        if r.terminated:
            return Trajectory(task=task, turns=tuple(turns), terminated=True)
    raise AssertionError("the reply without a call did not end the episode")


def _calls(task, *calls: tuple[str, dict]) -> list[str]:
    fmt = SPEC.make_env({}).format
    return [call_action(fmt, name, **args) for name, args in calls]


def _bfcl(task, *calls: tuple[str, dict]) -> bool:
    """bfcl-eval's checker called directly, as its ast_file_runner calls it (not through our reward)."""
    from bfcl_eval.constants.enums import Language

    output = [{name: args} for name, args in calls]
    verdict = checker_module().ast_checker(task.meta["functions"], output, task.answer, Language.PYTHON,
                                           task.meta["category"], "Qwen_Qwen3-8B-FC")
    return verdict["valid"]


CASES = [  # (entry, calls, right?) — simple_python_0: a triangle's area, base 10, height 5, unit optional
    ("simple_python_0", [("calculate_triangle_area", {"base": 10, "height": 5})], True),
    ("simple_python_0", [("calculate_triangle_area", {"base": 10, "height": 5, "unit": "units"})], True),
    ("simple_python_0", [("calculate_triangle_area", {"base": 10, "height": 6})], False),
    ("simple_python_0", [("calculate_triangle_area", {"base": 10})], False),  # a required parameter missing
    ("simple_python_0", [("calculate_triangle_area", {"base": "10", "height": 5})], False),  # a string for an integer
    ("simple_python_0", [("calculate_triangle_area", {"base": 10, "height": 5, "unit": "cm"})], False),
    ("simple_python_0", [("triangle_area", {"base": 10, "height": 5})], False),  # not the function given
    ("simple_python_0", [("calculate_triangle_area", {"base": 10, "height": 5})] * 2, False),  # one call asked
    ("simple_python_0", [], False),
]


@pytest.mark.parametrize(("bfcl_id", "calls", "right"), CASES)
def test_the_reward_on_hand_made_calls_agrees_with_bfcls_checker(bfcl_id, calls, right):
    task = _entry(bfcl_id)
    score = REWARD(task, _play(task, _calls(task, *calls)))
    assert score.details["correct"] == float(right) == float(_bfcl(task, *calls))
    assert score.value == (1.0 if right else pytest.approx(0.1 * (score.details["format"])))


def test_parallel_calls_are_right_in_any_order_and_wrong_with_one_missing():
    task = next(t for t in data.pool("train", ("parallel",))["parallel"])
    answer = data.first_answer(task.answer, task.meta["functions"])
    assert len(answer) >= 2
    for calls, right in [(answer, True), (answer[::-1], True), (answer[:-1], False)]:
        got = REWARD(task, _play(task, _calls(task, *calls))).details["correct"]
        assert got == float(right) == float(_bfcl(task, *calls)), calls


def test_demonstrations_score_one_on_every_training_task():
    tasks = [t for ts in data.pool("train", data.TRAIN_CATEGORIES).values() for t in ts]
    assert len(tasks) > 2000
    env = SPEC.make_env({})
    wrong = []
    for task in tasks:
        demo = SPEC.demonstration(task, env)
        actions = [env.format.render_assistant_body(m) for m in demo if m["role"] == "assistant"][:-1]
        if REWARD(task, _play(task, actions)).value != 1.0:
            wrong.append(task.id)
    assert wrong == []


def test_on_irrelevance_entries_no_call_is_right():
    task = next(t for t in data.pool("train", ("irrelevance",))["irrelevance"])
    fn = task.meta["functions"][0]
    some_args = {k: 1 for k in fn["parameters"].get("required", ())}
    assert task.answer is None and REWARD(task, _play(task, [])).value == 1.0
    assert REWARD(task, _play(task, _calls(task, (fn["name"], some_args)))).details["correct"] == 0.0
    assert REWARD(task, _play(task, ["<tool_call>{not json</tool_call>"])).details["correct"] == 0.0


def test_a_call_is_recorded_never_run_and_an_unknown_function_is_an_error(tmp_path):
    task = _entry("simple_python_0")
    env = SPEC.make_env({})
    env.reset(task)
    marker = tmp_path / "ran"
    result = env.step(call_action(env.format, "os.system", command=f"touch {marker}"))
    assert result.tool_errors == 1 and "no function 'os.system'" in result.observation[0]["content"]
    assert not marker.exists() and not result.terminated
    result = env.step(call_action(env.format, "calculate_triangle_area", base=1, height=2))
    assert result.tool_errors == 0 and result.observation[0]["content"].startswith("Call recorded")


def test_splits_hold_questions_apart_and_the_tools_are_the_entrys_functions():
    train = {t.prompt for ts in data.pool("train", data.TRAIN_CATEGORIES).values() for t in ts}
    for split in ("heldout_in", "heldout_out"):
        held = [t for ts in data.pool(split, data.OUT_CATEGORIES if split == "heldout_out" else data.TRAIN_CATEGORIES
                                      ).values() for t in ts]
        assert len(held) > 200 and not train & {t.prompt for t in held}
    task = SPEC.tasks("heldout_out", 1, 0)[0]
    assert task.meta["category"] in data.OUT_CATEGORIES
    env = SPEC.make_env({})
    env.reset(task)
    assert [s["function"]["name"] for s in env.tool_schemas] == [f["name"] for f in task.meta["functions"]]
    assert all(s["function"]["parameters"]["type"] == "object" for s in env.tool_schemas)  # BFCL's "dict"
    few = get_env("bfcl:simple_python,irrelevance").tasks("train", 40, 0)
    assert {t.meta["category"] for t in few} == {"simple_python", "irrelevance"}
    with pytest.raises(ValueError, match="not a training category"):
        get_env("bfcl:parallel_multiple")


def test_fewshot_shows_one_worked_example_before_the_question():
    task = _entry("simple_python_0")
    plain, shown = SPEC.make_env({}).reset(task), SPEC.make_env({"fewshot": True}).reset(task)
    example = shown[1:-1]
    assert shown[0] == plain[0] and shown[-1] == plain[-1] and plain[-1]["content"] == task.prompt
    assert [m["role"] for m in example] == ["user", "assistant", "tool", "assistant"]
    name = example[1]["tool_calls"][0]["function"]["name"]
    assert name in example[0]["content"] and name != "calculate_triangle_area"


def test_the_env_imports_bfcl_without_its_model_handlers():
    """bfcl-eval is installed --no-deps: scoring must not import its handlers (tree-sitter, ...), nor
    bfcl_eval.utils (it makes directories inside site-packages)."""
    code = ("import sys; from agentic_rl.envs.registry import get_env; s = get_env('bfcl');"
            "from agentic_rl.types import Trajectory\n"
            "for t in (s.tasks('train', 4, 0)[0], s.tasks('multi_turn', 1, 0)[0]):\n"
            "    s.make_env({}).reset(t); s.make_reward({})(t, Trajectory(task=t, turns=(), terminated=True))\n"
            "print(sorted(m for m in sys.modules if 'model_handler' in m or m in ('bfcl_eval.constants.model_config',"
            " 'bfcl_eval.utils') or m.startswith('tree_sitter')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


def test_check_env_passes(tokenizer):
    checks = check_env("bfcl", tokenizer)
    assert all(c.passed for c in checks), [c for c in checks if not c.passed]


def test_multi_turn_possible_answers_run_on_the_backends_and_bfcls_checker_accepts_them():
    """Every multi_turn_base entry: its possible answer, played through the env (the calls run on
    BFCL's backends, a reply shows the next user turn), is right by BFCL's multi-turn checker; the
    same with one turn's last call left out is wrong."""
    from agentic_rl.data import bfcl_multi_turn

    tasks = bfcl_multi_turn.tasks()
    assert len(tasks) == 200
    env = SPEC.make_env({})
    for task in tasks:
        actions = [env.format.render_assistant_body(m) for m in SPEC.demonstration(task, env) if m["role"] == "assistant"]
        assert REWARD(task, _play_all(task, actions)).details["correct"] == 1.0, task.id
    task = tasks[0]  # multi_turn_base_0: turn 0 is cd, mkdir, mv; without the mv the file stays
    actions = [env.format.render_assistant_body(m) for m in SPEC.demonstration(task, env) if m["role"] == "assistant"]
    assert '"mv"' in actions[2]
    assert REWARD(task, _play_all(task, actions[:2] + actions[3:])).details["correct"] == 0.0
    unfinished = REWARD(task, _play_all(task, actions[:-1])).details  # the last reply never given
    assert (unfinished["correct"], unfinished["outcome/unfinished"]) == (0.0, 1.0)


def _play_all(task, actions: list[str]) -> Trajectory:
    env = SPEC.make_env({})
    env.reset(task)
    turns, done = [], False
    for text in actions:
        r = env.step(text)
        turns.append(Turn((), (1,), (0.0,), text, "stop", tool_calls=r.tool_calls, malformed_calls=r.malformed_calls,
                          tool_errors=r.tool_errors))
        done = r.terminated
    return Trajectory(task=task, turns=tuple(turns), terminated=done)


def test_multi_turn_demonstrations_through_the_real_rollout_loop(tokenizer):
    """The token contract on multi-turn entries (check-env runs the training split only): the
    replayed possible answer gets the demonstration's observations and user turns, reward 1, and the
    very tokens and mask SFT would train on."""
    from agentic_rl.rollout.conformance import _demonstrations

    tasks = SPEC.tasks("multi_turn", 2, 0)
    check = _demonstrations(SPEC, {}, tokenizer, tasks)
    assert check.passed, check.detail


@pytest.mark.slow
def test_sft_then_grpo_on_the_real_model(tmp_path):
    """recipes/bfcl.yaml, shortened, with the real SmolLM2-135M: SFT on BFCL's possible answers
    teaches the protocol (the base model writes prose and never calls), then two GRPO steps run with
    finite metrics. Measured 2026-12-02 (16 tasks, ~28 minutes on 2 busy cores): base 0.0625 calls an
    episode, format 0.31; after SFT 3.19 calls, format 0.81 — accuracy fell from 0.25 (the base's
    right answers are the irrelevance entries, where no call is right) to 0.06, as the SFT'd model
    calls on those too; 0.19 after the two GRPO steps. Accuracy is not asserted: one short seed."""
    import json
    import math

    from agentic_rl.trainer.config import load_config
    from agentic_rl.trainer.loop import train

    cfg = load_config("recipes/bfcl.yaml", [
        f"output_dir={tmp_path}", "sft.examples=32", "rl.steps=2", "rl.tasks.per_step=2", "rl.tasks.group_size=4",
        "eval.tasks_per_split=16", "eval.splits=[heldout_in]", "log.progress=false", "log.tensorboard=false"])
    results = train(cfg)
    base, sft = (results[k]["heldout_in"] for k in ("base_zero_shot", "sft"))
    assert base["tool_calls_per_episode"] <= 0.25 and sft["tool_calls_per_episode"] >= 1.0, (base, sft)
    assert sft["format_rate"] >= 0.6 > base["format_rate"], (base, sft)
    rows = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    rl = [r for r in rows if r["stage"] == "rl"]
    assert len(rl) == 2 and all(math.isfinite(r["loss"]) and math.isfinite(r["entropy"]) for r in rl)


def test_multi_turn_calls_reach_only_the_documented_methods():
    """A backend's private methods, its constructor and a name no doc gives are error observations;
    bad arguments are the backend's error, read by the model."""
    task = next(t for t in SPEC.tasks("multi_turn", 200, 0) if t.meta["involved_classes"] == ["GorillaFileSystem"])
    env = SPEC.make_env({})
    env.reset(task)
    for name in ("_load_scenario", "__init__", "os.system", "eval"):
        result = env.step(call_action(env.format, name, scenario={}))
        assert result.tool_errors == 1 and result.observation[0]["content"].startswith("Error: no function"), name
    result = env.step(call_action(env.format, "cd", directory="nowhere"))  # cd takes `folder`
    assert result.tool_errors == 1 and "Error during execution" in result.observation[0]["content"]
    assert env.step(call_action(env.format, "pwd")).observation[0]["content"].startswith('{"current_working_directory"')
