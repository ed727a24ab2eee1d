"""The SkyRL-Gym adapter on the text envs skyrl_gym ships (gsm8k, gsm8k_multi_turn, text2sql, search)
with their data made locally: episodes through our rollout loop, then the same replies replayed on
skyrl_gym's own env (`skyrl_gym.make`, its `step`) give the same per-step rewards, summed to our
outcome; a SkyRL dataset file as the tasks; check-env."""

from __future__ import annotations

import json

import pytest
import skyrl_gym
from omegaconf import OmegaConf

from agentic_rl.engines.base import SamplingParams
from agentic_rl.engines.scripted import ScriptedEngine
from agentic_rl.envs.registry import resolve_env
from agentic_rl.rewards.scoring import score_groups
from agentic_rl.rollout.conformance import check_env
from agentic_rl.rollout.loop import Budget, rollout

EOS = "<|im_end|>"


def _scripts(env_id: str, task) -> list[list[str]]:
    """Replies per episode: right, wrong, malformed, and (multi-turn envs) a tool step first."""
    truth = task.meta["extras"]["reward_spec"]["ground_truth"]
    if env_id in ("gsm8k", "gsm8k_multi_turn"):
        return [[f"So #### {truth}{EOS}"], [f"#### {int(truth) + 1}{EOS}", f"#### {truth}{EOS}"],
                [f"It is {truth}.{EOS}", f"#### {truth},{EOS}"]]
    if env_id == "text2sql":
        ok = f"<think>t</think>\n<solution>{truth}</solution>{EOS}"
        return [[f"<think>look</think><sql>{truth}</sql>", "<think>ok</think>" + ok.split("</think>", 1)[1]],
                ["<think>x</think><sql>SELECT nope FROM nothing</sql>", "<think>y</think><solution>SELECT 1</solution>" + EOS],
                [f"<solution>{truth}</solution>{EOS}"]]  # no <think>: SkyRL's format reward, -1
    target = truth["target"][0]
    return [[f"<think>a</think><search>{task.prompt.removeprefix('Question: ')}</search>",
             f"<think>b</think><answer>{target}</answer>{EOS}"],
            [f"<answer>{target}x</answer>{EOS}"], ["<search>zzz</search>", "<search>qqq</search>", "no answer" + EOS]]


def _skyrl_rewards(spec, env_id: str, task, replies: list[str]) -> list[float]:
    """skyrl_gym's own env on the same replies, decoded as SkyRL's generator decodes them."""
    ours = spec.make_env({})
    env = skyrl_gym.make(env_id, env_config=OmegaConf.create(ours.config), extras=json.loads(json.dumps(task.meta["extras"])))
    env.init(list(task.meta["prompt"]))
    rewards = []
    for reply in replies:
        out = env.step(reply)
        rewards.append(float(out["reward"]))
        if out["done"]:
            break
    env.close()
    return rewards


@pytest.mark.parametrize("env_id", ["gsm8k", "gsm8k_multi_turn", "text2sql", "search"])
def test_rewards_on_our_episodes_equal_skyrl_gyms_own_step(env_id, tokenizer):
    spec = resolve_env(f"skyrl:{env_id}", {})
    tasks = spec.tasks("train", 2, 0)
    scripts = [s for t in tasks for s in _scripts(env_id, t)]
    fmt = spec.make_env({}).format
    engine = ScriptedEngine(tokenizer, lambda row, turn: scripts[row][min(turn, len(scripts[row]) - 1)])
    groups, _ = rollout(engine, lambda: spec.make_env({}), tasks, 3,
                        SamplingParams(1.0, 1.0, 256, fmt.stop_strings), Budget(6, 256, 4096))
    seen = set()
    for g in score_groups(spec.make_reward({}), groups):
        for traj in g.trajectories:
            assert traj.error is None and traj.terminated, traj.error
            replies = [tokenizer.decode(list(t.action_ids), skip_special_tokens=True) for t in traj.turns]
            theirs = _skyrl_rewards(spec, env_id, g.task, replies)
            assert [t.reward or 0.0 for t in traj.turns] == theirs
            assert traj.reward == pytest.approx(sum(theirs))  # the sum of floats, in the same order
            seen.add(round(traj.reward, 6))
    assert len(seen) >= 2, seen  # the scripts earn different rewards: the comparison can tell them apart


def test_the_rewards_are_skyrl_gyms_published_rules(tokenizer):
    """By hand, from skyrl_gym's code: multi-turn GSM8K pays 0.2 / max_turns (5) for a well-formed
    wrong answer and 1 for the right one; text2SQL pays -1 for a solution with no <think>."""
    def first(env_id: str, replies: list[str]) -> list[float | None]:
        spec = resolve_env(f"skyrl:{env_id}", {})
        env, task = spec.make_env({}), spec.tasks("train", 1, 0)[0]
        env.reset(task)
        truth = task.meta["extras"]["reward_spec"]["ground_truth"]
        return [env.step(r.format(truth=truth, wrong=f"{truth} + 1")).reward for r in replies]
    assert first("gsm8k_multi_turn", ["#### 0", "#### {truth}"]) == [pytest.approx(0.04), 1.0]
    assert first("text2sql", ["<solution>{truth}</solution>"]) == [-1.0]


def test_a_skyrl_dataset_file_is_the_tasks(tmp_path):
    rows = [{"prompt": [{"role": "user", "content": f"What is {i} + {i}? Answer after ####."}], "env_class": "gsm8k",
             "reward_spec": {"method": "rule", "ground_truth": str(2 * i)}, "extra_info": {"index": i}} for i in range(10)]
    (tmp_path / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    options = {"train": str(tmp_path / "train.jsonl"), "heldout_frac": 0.2}
    spec = resolve_env("skyrl:gsm8k", options)
    train, heldout = spec.tasks("train", 8, 0), spec.tasks("heldout", 8, 0)
    assert len(heldout) == 2 and not {t.prompt for t in train} & {t.prompt for t in heldout}
    env = spec.make_env(options)
    task = train[0]
    assert env.reset(task) == rows[task.meta["extras"]["extra_info"]["index"]]["prompt"]
    assert env.step(f"#### {task.answer}").reward == 1.0  # the row's ground truth reached the env


@pytest.mark.parametrize("env_id", ["gsm8k", "text2sql"])
def test_check_env_passes(env_id, tokenizer):
    checks = check_env(f"skyrl:{env_id}", tokenizer)
    assert all(c.passed for c in checks), [c for c in checks if not c.passed]
