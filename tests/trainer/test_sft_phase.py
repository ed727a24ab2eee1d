"""The SFT phase: gradient accumulation does not change the gradient, the graduation measures are
right on hand-checked inputs, and a recipe that requires graduation stops before RL when it fails."""

from __future__ import annotations

import dataclasses
import json
import re

import pytest
import torch

from agentic_rl.trainer import loop
from agentic_rl.trainer.config import load_config
from agentic_rl.trainer.graduation import distinct_n, pairwise_similarity, window_drop
from agentic_rl.trainer.sft import sft_step


def test_grad_accumulation_gives_the_same_gradient(tiny, tokenizer, make_group):
    """Token mean over the whole step: one micro-batch of 4 and two of 2 give one gradient."""
    trajs = list(make_group(0, [1.0, 1.0], torch.Generator().manual_seed(0)).trajectories)
    trajs += list(make_group(1, [1.0, 1.0], torch.Generator().manual_seed(1)).trajectories)
    grads = []
    for split in ([trajs], [trajs[:2], trajs[2:]]):
        opt = torch.optim.SGD(tiny.parameters(), lr=0.0)  # lr 0: a step that leaves the weights alone
        sft_step(tiny, opt, split, tokenizer.pad_token_id, "fp32")
        grads.append(torch.cat([p.grad.flatten() for p in tiny.parameters() if p.grad is not None]).clone())
    torch.testing.assert_close(grads[0], grads[1], atol=1e-6, rtol=1e-4)


def test_graduation_measures():
    # losses 1.0, 0.9, ..., 0.6 (5 steps): slope -0.1 per step, drop 0.4 over the window, mean 0.8 -> 0.5
    assert window_drop([1.0, 0.9, 0.8, 0.7, 0.6], 5) == pytest.approx(0.5)
    assert window_drop([0.5] * 6, 5) == pytest.approx(0.0) and window_drop([1.0, 0.5], 5) is None
    # "a b c a b": bigrams ab, bc, ca, ab -> 3 distinct of 4
    assert distinct_n(["a b c a b"], 2) == 0.75
    assert pairwise_similarity(["same", "same", "same"]) == 1.0 and pairwise_similarity(["abcd", "wxyz"]) == 0.0


def test_require_graduation_stops_before_rl(tmp_path):
    cfg = load_config("recipes/tiny.yaml", [f"output_dir={tmp_path}", "eval.baselines=false", "sft.require_graduation=true",
                                            "sft.graduation_prompts=2", "sft.diversity_prompts=1", "sft.diversity_samples=2"])
    with pytest.raises(loop.NotGraduated, match="SFT did not graduate, so RL does not start"):
        loop.train(cfg)
    report = json.loads((tmp_path / "graduation.json").read_text())
    assert report["graduated"] is False and report["formatted"] is False  # a random tiny model never formats
    assert '"stage": "rl"' not in (tmp_path / "metrics.jsonl").read_text()


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_packing_does_not_leak_attention_across_conversations(tiny, tokenizer, make_group, precision):
    """Each trajectory's logprobs in a packed row equal its logprobs alone: no token of one
    conversation sees another (block-diagonal attention, positions restarting per conversation)."""
    from agentic_rl.models.forward import token_logprobs
    from agentic_rl.models.precision import autocast
    from agentic_rl.trainer.batching import make_batch, make_packed_batch, pack

    trajs = list(make_group(0, [1.0, 0.0, 1.0], torch.Generator().manual_seed(3)).trajectories)
    trajs.append(make_group(1, [1.0], torch.Generator().manual_seed(4)).trajectories[0])
    rows = pack(trajs, max_tokens=60)  # each is 29 tokens: two per row
    assert [len(r) for r in rows] == [2, 2]
    with torch.no_grad(), autocast(precision, tiny.device):
        packed, _ = token_logprobs(tiny, make_packed_batch(rows, tokenizer.pad_token_id))
        for i, row in enumerate(rows):
            at = 0
            for t in row:
                single = make_batch([t], tokenizer.pad_token_id)
                alone, _ = token_logprobs(tiny, single)
                n = len(t.token_ids())
                got = packed[i, at : at + n][torch.tensor(t.loss_mask(), dtype=torch.bool)]
                want = alone[0][single.loss_mask[0].bool()]  # the trained tokens, in order
                torch.testing.assert_close(got, want, atol=2e-2 if precision == "bf16" else 1e-5, rtol=0)
                at += n


def test_sft_demonstrates_the_mix_it_is_given(tokenizer):
    """sft.mix picks the demonstrated tasks by a meta field; empty, they are the train split's first N."""
    from agentic_rl.data.calculator import TRAIN_TEMPLATES
    from agentic_rl.envs.registry import get_env
    from agentic_rl.trainer.sft import sft_trajectories

    spec = get_env("calculator_compound")
    data = lambda *o: sft_trajectories(spec, load_config("recipes/calculator.yaml", list(o)).sft, {}, tokenizer)  # noqa: E731
    trajs = data("sft.examples=10", "sft.mix_key=family", "sft.mix={two_step: 1}")
    assert len(trajs) == 10 and {t.task.meta["family"] for t in trajs} == {"two_step"}
    # the recipe's own mix (by template, 2 or 4 shares of 34) demonstrates every training template
    recipe = data()
    assert {t.task.meta["template"] for t in recipe} == {t.id for t in TRAIN_TEMPLATES}
    plain = data("sft.examples=10", "sft.mix={}")
    assert [t.task.id for t in plain] == [t.id for t in spec.tasks("train", 10, 1)]


def test_graduation_reads_the_sft_evaluation_episodes(tiny, tokenizer):
    """The format check reads the held-out evaluation's greedy episodes when they open with the
    report's prompts (the same tasks, the same model), and decodes the prompts itself otherwise.
    A random tiny model never formats (format 0 when it decodes); the given episodes are marked
    formatted, so the rate says which ones the report read."""
    from dataclasses import replace

    from agentic_rl.engines.hf import HFEngine
    from agentic_rl.envs.registry import get_env
    from agentic_rl.trainer.graduation import graduation_report
    from agentic_rl.types import Trajectory, TrajectoryGroup, Turn

    cfg = load_config("recipes/tiny.yaml", ["sft.graduation_prompts=3", "sft.diversity_prompts=1",
                                            "sft.diversity_samples=2", "rollout.max_new_tokens=8"])
    spec = get_env(cfg.env.name)
    tasks = spec.tasks(cfg.eval.splits[0], 5, cfg.eval.seed)
    turn = Turn((1, 2), (3,), (-0.1,), "x", "eos")
    given = [TrajectoryGroup(t, (Trajectory(t, (turn,), reward=1.0, reward_details={"format": 1.0, "correct": 1.0}),))
             for t in tasks]
    engine = HFEngine(tiny, tokenizer, "fp32")
    read = graduation_report(engine, tokenizer, spec, cfg, [1.0] * 5, given)
    assert read.format_rate == 1.0 and read.accuracy == 1.0
    other = [TrajectoryGroup(replace(g.task, id=g.task.id + "-other"), g.trajectories) for g in given]
    decoded = graduation_report(engine, tokenizer, spec, cfg, [1.0] * 5, other)
    assert decoded.format_rate == 0.0


@pytest.mark.parametrize("key", ["max_new_tokens", "max_turns", "max_episode_tokens"])
def test_sft_data_the_rollout_would_cut_is_named_with_the_value_that_fits(tokenizer, key):
    """The calculator's demonstrations, measured here by hand, against a budget one short of the
    longest: said, naming the key and the value that fits; at the longest: nothing to say. (A
    FrozenLake act call is 33 tokens with its closing tag; a budget of 32 cut every call of every
    episode.)"""
    from agentic_rl.envs.registry import get_env
    from agentic_rl.trainer.sft import cut_by_rollout, sft_trajectories

    cfg = load_config("recipes/calculator.yaml", ["sft.examples=12"])
    data = sft_trajectories(get_env("calculator"), cfg.sft, cfg.env.options, tokenizer)
    need = {"max_new_tokens": max(len(x.action_ids) for t in data for x in t.turns),
            "max_turns": max(len(t.turns) for t in data),
            "max_episode_tokens": max(sum(len(x.action_ids) for x in t.turns) for t in data)}[key]
    fits = dataclasses.replace(cfg.rollout, **{k: 10_000 for k in ("max_new_tokens", "max_turns", "max_episode_tokens")})
    assert cut_by_rollout(data, dataclasses.replace(fits, **{key: need})) == []
    (said,) = cut_by_rollout(data, dataclasses.replace(fits, **{key: need - 1}))
    assert re.match(rf"rollout\.{key} is {need - 1}, .* set rollout\.{key}: {need} or more$", said)


@pytest.mark.slow
@pytest.mark.parametrize("recipe", ["bfcl", "calculator", "code", "frozen_lake", "opd", "retool", "search_r1",
                                    "skyrl_gsm8k", "sokoban", "sql", "swe_repair", "tau2_mock"])
def test_every_recipe_s_sft_data_fits_its_rollout(recipe):
    """With SmolLM2's tokenizer: what each recipe's SFT teaches, its rollout can sample."""
    from agentic_rl.envs.registry import get_env
    from agentic_rl.models.loader import load_tokenizer, smollm2_dir
    from agentic_rl.trainer.sft import cut_by_rollout, sft_trajectories

    cfg = load_config(f"recipes/{recipe}.yaml", [])
    data = sft_trajectories(get_env(cfg.env.name), cfg.sft, cfg.env.options, load_tokenizer(str(smollm2_dir())))
    assert cut_by_rollout(data, cfg.rollout) == []
