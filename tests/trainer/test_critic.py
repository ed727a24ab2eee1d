"""PPO with a critic through the trainer: a value head on the policy, GAE advantages from its values,
the clipped value loss on sampled tokens only, several epochs over minibatches."""

from __future__ import annotations

import json
import math

import pytest
import torch

from agentic_rl.algorithms.value import ValueHead
from agentic_rl.trainer import loop
from agentic_rl.trainer.config import load_config
from agentic_rl.trainer.credit import Credit, Scorer, compute_credit, critic_values
from agentic_rl.trainer.critic import Critic, make_critic
from tests.helpers import update

GAE = ["rl.algorithm.advantage=gae", "rl.critic.kind=value_head", "rl.optim.lr=1e-3", "rl.critic.lr=1e-2"]


def _values(tiny, tokenizer, critic, groups):
    return critic_values(Scorer(tiny, tokenizer.pad_token_id, "fp32", 1.0, critic=critic), groups)


def _ppo_step(tiny, tokenizer, cfg, groups, critic, opt):
    credit = compute_credit(groups, cfg.rl.algorithm, values=_values(tiny, tokenizer, critic, groups))
    return credit, update(tiny, opt, groups, cfg, tokenizer.pad_token_id, credit, models={"critic": critic})


def test_gae_returns_are_the_outcome_for_a_fresh_critic_and_values_stay_off_observations(tiny, tokenizer, make_group):
    # A zero-initialised head predicts V = 0; with gamma = lambda = 1 and the reward on the last
    # sampled token, every sampled token's return is the episode's outcome reward.
    cfg = load_config("recipes/tiny.yaml", GAE)
    groups = [make_group(0, [1.0, 0.0, 0.1], torch.Generator().manual_seed(0))]
    values = _values(tiny, tokenizer, Critic(ValueHead(tiny.config.hidden_size)), groups)
    credit = compute_credit(groups, cfg.rl.algorithm, values=values)
    for t, ret, v in zip(groups[0].trajectories, credit.returns, values):
        mask = torch.tensor(t.loss_mask(), dtype=torch.bool)
        assert torch.all(ret[mask] == t.reward) and not ret[~mask].any() and not v.any()


def test_ppo_epochs_take_epochs_x_minibatches_steps_and_the_critic_learns(tiny, tokenizer, make_group):
    cfg = load_config("recipes/tiny.yaml", GAE + ["rl.optim.epochs=2", "rl.optim.minibatches=2"])
    groups = [make_group(i, r, torch.Generator().manual_seed(i)) for i, r in enumerate([[1.0, 0.0], [0.0, 1.0]])]
    critic = Critic(ValueHead(tiny.config.hidden_size))
    opt = torch.optim.AdamW([{"params": tiny.parameters(), "lr": cfg.rl.optim.lr},
                             {"params": critic.parameters(), "lr": cfg.rl.critic.lr}])
    mse = []
    for _ in range(4):
        _, m = _ppo_step(tiny, tokenizer, cfg, groups, critic, opt)
        assert m["optimizer_steps"] == 4
        mse.append(m["value_mse"])
    # The head starts at V = 0 against returns of 0 or 1 (squared error 0.5 on average at the first
    # minibatch; the logged mse averages the update's 4 steps, so it is already lower). Regressing on
    # the returns keeps lowering it.
    assert mse[0] <= 0.5 and mse[-1] < 0.5 * mse[0]


@pytest.mark.parametrize("kind", ["value_head", "model"])
def test_the_value_loss_reaches_the_policy_only_through_a_shared_head(tiny, tokenizer, make_group, kind):
    """With zero advantages the policy-gradient term is exactly 0, so whatever moves is moved by the
    value loss: a head on the policy drags the policy's trunk along; a separate critic model leaves
    the policy untouched and learns in its own weights."""
    cfg = load_config("recipes/tiny.yaml", [*GAE[:1], f"rl.critic.kind={kind}", "rl.optim.lr=1e-3", "rl.critic.lr=1e-2"])
    groups = [make_group(0, [1.0, 0.0], torch.Generator().manual_seed(0))]
    critic = make_critic(kind, tiny, tokenizer)
    opt = torch.optim.AdamW([{"params": tiny.parameters(), "lr": 1e-3}, {"params": critic.parameters(), "lr": 1e-2}],
                            weight_decay=0.0)  # decay would move the policy without any gradient
    credit = compute_credit(groups, cfg.rl.algorithm, values=_values(tiny, tokenizer, critic, groups))
    zero = Credit([torch.zeros_like(a) for a in credit.advantages], credit.returns, credit.values)
    policy_before = {k: v.clone() for k, v in tiny.state_dict().items()}
    backbone_before = None if critic.shared else {k: v.clone() for k, v in critic.backbone.state_dict().items()}
    for _ in range(2):  # the head starts at 0, so the trunk under it gets gradient from the 2nd step on
        m = update(tiny, opt, groups, cfg, tokenizer.pad_token_id, zero, models={"critic": critic})
        assert m["value_loss"] > 0
    policy_moved = any(not torch.equal(v, tiny.state_dict()[k]) for k, v in policy_before.items())
    assert policy_moved == critic.shared
    if not critic.shared:
        assert any(not torch.equal(v, critic.backbone.state_dict()[k]) for k, v in backbone_before.items())


ALGORITHMS = {
    "ppo_gae": GAE,
    "ppo_gae_critic_model": ["rl.algorithm.advantage=gae", "rl.critic.kind=model", "rl.optim.lr=1e-3", "rl.critic.lr=1e-3"],
    "grpo": [],
    "gspo": ["rl.algorithm.policy_loss=gspo", "rl.algorithm.clip_low=3e-4", "rl.algorithm.clip_high=4e-4", "rl.algorithm.aggregation=seq-mean-token-mean"],
    "rloo": ["rl.algorithm.advantage=rloo"],
    "reinforce_pp": ["rl.algorithm.advantage=reinforce_pp"],
    # (DAPO's truncation mask is tested in test_credit.py: every episode of the random tiny model is
    # truncated, so with it on there would be nothing left to train here.)
    "dapo": ["rl.algorithm.clip_high=0.28", "rl.algorithm.overlong_buffer=8"],
    "cispo": ["rl.algorithm.policy_loss=cispo", "rl.algorithm.clip_high=4.0"],
}


@pytest.mark.parametrize("name", sorted(ALGORITHMS))
def test_every_algorithm_runs_the_tiny_recipe(tmp_path, name, snapshot):
    """Each named algorithm trains through `train()`: parameters move, metrics are finite. The tiny
    model's rewards are mostly equal, so an entropy bonus keeps every group in the update."""
    overrides = [f"output_dir={tmp_path}", "sft.examples=0", "eval.baselines=false", "eval.tasks_per_split=2",
                 "rl.algorithm.entropy_coef=0.01", *ALGORITHMS[name]]
    loop.train(load_config("recipes/tiny.yaml", overrides))
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    rl_rows = [r for r in rows if r["stage"] == "rl"]
    assert len(rl_rows) == 2
    assert all(isinstance(r[k], (int, float)) and math.isfinite(r[k]) for r in rl_rows
               for k in ("loss", "entropy", "kl", "clip_frac", "grad_norm"))
    after = snapshot["model"].state_dict()
    assert any(not torch.equal(v, after[k]) for k, v in snapshot["before"].items())
    if name.startswith("ppo_gae"):
        assert all("value_loss" in r for r in rl_rows)
        assert (tmp_path / "checkpoints" / "critic" / "value_head.pt").exists()
        assert (tmp_path / "checkpoints" / "critic" / "model").exists() == name.endswith("critic_model")
