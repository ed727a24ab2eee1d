"""Credit before the update: the overlong penalty on outcome rewards, the KL penalty as a dense token
reward aligned with the trajectory's tokens, and DAPO's truncation mask in the update."""

from __future__ import annotations

from dataclasses import replace

import torch

from agentic_rl.trainer.config import load_config
from agentic_rl.trainer.credit import Scorer, compute_advantages, kl_token_rewards, outcome_rewards
from tests.helpers import update


def test_overlong_penalty_lowers_only_the_rewards_of_long_episodes(make_group):
    # tiny.yaml: max_episode_tokens 48. Buffer 12: no penalty up to 36 generated tokens, then a linear
    # ramp (36 - |y|)/12. Our synthetic episodes generate 10 tokens (no penalty); pad one to 42: -0.5.
    cfg = load_config("recipes/tiny.yaml", ["rl.algorithm.overlong_buffer=12"])
    gen = torch.Generator().manual_seed(0)
    group = make_group(0, [1.0, 0.0], gen)
    long_turn = replace(group.trajectories[1].turns[1], action_ids=(7,) * 36, logprobs=(-1.0,) * 36)
    t1 = replace(group.trajectories[1], turns=(group.trajectories[1].turns[0], long_turn))
    group = replace(group, trajectories=(group.trajectories[0], t1))
    assert t1.num_generated == 42
    assert outcome_rewards([group], cfg.rl.algorithm, cfg.rollout.max_episode_tokens).tolist() == [[1.0, -0.5]]


def test_kl_rewards_sit_on_sampled_tokens_and_equal_k1_of_the_trainers_full_forwards(tiny, tokenizer, make_group):
    """The KL in the reward is the trainer's policy against the reference, not the sampler against it:
    the episodes' sampler logprobs here are a stale engine's (-1.0 on every token), and change nothing."""
    from agentic_rl.models.loader import tiny_model

    cfg = load_config("recipes/tiny.yaml", ["rl.algorithm.kl_coef=0.5", "rl.algorithm.kl_mode=reward", "rl.algorithm.kl_estimator=k1"])
    gen = torch.Generator().manual_seed(1)
    groups = [make_group(0, [1.0, 0.0, 0.0], gen)]
    reference = tiny_model(tokenizer, seed=3).eval()
    rewards = kl_token_rewards(Scorer(tiny, tokenizer.pad_token_id, "fp32", 1.0, reference), groups, cfg.rl.algorithm)

    def plain(model, ids):  # logprobs by a plain full-sequence forward, no prefix sharing or slicing
        with torch.no_grad():
            return torch.log_softmax(model(ids).logits[0, :-1].float(), -1).gather(1, ids[0, 1:, None])[:, 0]

    for t, r in zip(groups[0].trajectories, rewards):
        ids = torch.tensor([t.token_ids()])
        mask = torch.tensor(t.loss_mask(), dtype=torch.bool)
        expected = -0.5 * (plain(tiny, ids) - plain(reference, ids))  # k1 = log pi_policy - log pi_ref
        # 1e-4: two fp32 forwards of logprobs near -11 (ulp 9.5e-7) by different kernel paths
        torch.testing.assert_close(r[1:][mask[1:]], expected[mask[1:]], atol=1e-4, rtol=0)
        assert not r[~mask].any()
        assert (expected[mask[1:]] - (-0.5 * (torch.tensor(t.sampled_logprobs())[1:] - plain(reference, ids)))[mask[1:]]
                ).abs().max() > 1.0  # the sampler's logprobs would have given another reward
    adv = compute_advantages(groups, cfg.rl.algorithm, token_rewards=rewards)
    assert all(a.shape == r.shape for a, r in zip(adv, rewards))


def test_mask_truncated_removes_truncated_episodes_from_the_loss(tiny, tokenizer, make_group):
    cfg = load_config("recipes/tiny.yaml", ["rl.algorithm.mask_truncated=true", "rl.optim.lr=1e-3"])
    gen = torch.Generator().manual_seed(2)
    group = make_group(0, [1.0, 0.0, 1.0, 0.0], gen)
    group = replace(group, trajectories=(replace(group.trajectories[0], truncated=True), *group.trajectories[1:]))
    opt = torch.optim.AdamW(tiny.parameters(), lr=cfg.rl.optim.lr)
    m = update(tiny, opt, [group], cfg, tokenizer.pad_token_id)
    assert m["trained_tokens"] == 3 * 10  # 3 of 4 samples x 10 sampled tokens
