"""rl_update on synthetic groups with a tiny model: the minibatch split, the zero-spread filter and
the behaviour-policy choice (ratio exactly 1 on the first minibatch)."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
import torch

from agentic_rl.trainer.config import load_config
from agentic_rl.trainer.credit import compute_advantages
from agentic_rl.trainer.update import GroupWork, micro_batches, split_minibatches, split_ragged
from agentic_rl.types import Trajectory, TrajectoryGroup
from tests.helpers import update


def test_split_minibatches_covers_every_group_once(make_group):
    for n in range(0, 9):
        for k in range(1, 5):
            parts = split_minibatches(n, k)
            assert [i for p in parts for i in p] == list(range(n))
            if n:
                assert len(parts) == min(k, n) and max(map(len, parts)) - min(map(len, parts)) <= 1


def test_micro_batches_pack_small_groups_never_split_one_nor_mix_teachers(make_group):
    gen = torch.Generator().manual_seed(0)
    sizes = [2, 2, 2, 2, 2, 8, 2]
    work = [GroupWork(make_group(i, [0.0] * n, gen), []) for i, n in enumerate(sizes)]
    ids = lambda packed: [[int(w.group.task.id) for w in m] for m in packed]  # noqa: E731
    assert ids(micro_batches(work, 8)) == [[0, 1, 2, 3], [4], [5], [6]]
    assert ids(micro_batches(work, 1)) == [[i] for i in range(7)]  # one group each: the old layout
    route = lambda task: (int(task.id) // 2,)  # noqa: E731  (group i is routed to teacher i // 2)
    assert ids(micro_batches(work, 8, route)) == [[0, 1], [2, 3], [4], [5], [6]]


def _own_prompts(groups):
    """Give each group a prompt of its own after a shared head (system prompt and tools, then the
    task), so a merged micro-batch shares only the head."""
    out = []
    for i, g in enumerate(groups):
        prompt = (*range(10, 16), 300 + i, 400 + i)
        trajs = tuple(Trajectory(t.task, (replace(t.turns[0], obs_ids=prompt), *t.turns[1:]), reward=t.reward)
                      for t in g.trajectories)
        out.append(TrajectoryGroup(g.task, trajs))
    return out


def test_merged_micro_batches_give_the_update_of_one_group_per_forward(tokenizer, make_group):
    """Four groups of 2 with their own prompts: one micro-batch of 8 rows (sharing only the prompt
    head) and four of 2 give the same update — the loss is a sum over rows with the minibatch's
    normalizer, whatever the forward passes. SGD, so the update is the gradient itself; fp32."""
    from agentic_rl.models.loader import tiny_model

    gen = torch.Generator().manual_seed(5)
    groups = _own_prompts([make_group(i, r, gen) for i, r in enumerate([[1.0, 0.0], [0.0, 1.0], [0.3, 1.0], [1.0, 0.2]])])
    deltas = []
    for rows in (8, 2):
        cfg = load_config("recipes/tiny.yaml", [f"rl.optim.micro_batch_rows={rows}", "rl.optim.lr=1.0"])
        model = tiny_model(tokenizer, seed=0).eval()
        before = model.lm_head.weight.detach().clone()
        m = update(model, torch.optim.SGD(model.parameters(), lr=1.0), groups, cfg, tokenizer.pad_token_id)
        assert m["optimizer_steps"] == 1 and m["trained_tokens"] == 8 * 10
        deltas.append(model.lm_head.weight.detach() - before)
    assert deltas[0].abs().max() > 0
    torch.testing.assert_close(deltas[0], deltas[1], rtol=1e-4, atol=1e-7)


@pytest.mark.parametrize("rows", [3, 6])
def test_the_shared_system_prompt_gives_the_update_of_forwarding_it_per_group(tokenizer, make_group, with_questions,
                                                                            monkeypatch, rows):
    """The system prompt forwarded once a step (`forward.SharedPrompt`) against once a micro-batch:
    the same update, hindsight corrections included (they read the same cache). With 6 rows two
    groups share a micro-batch, whose common prefix is then the shared prompt itself (nothing of its
    own to forward). SGD at lr 1, so the update is the gradient; fp32. The shared path must be
    taken, or the comparison proves nothing."""
    from agentic_rl.models import forward
    from agentic_rl.models.loader import tiny_model
    from agentic_rl.trainer import update as update_module

    gen = torch.Generator().manual_seed(7)
    groups = with_questions([make_group(i, r, gen) for i, r in enumerate([[1.0, 0.0, 0.0], [0.0, 1.0, 1.0], [0.2, 1.0, 0.0]])])
    corrections = with_questions([make_group(9, [1.0], gen)])[0].trajectories
    built = []

    def spy(*args, **kwargs):
        built.append(forward.shared_prompt(*args, **kwargs))
        return built[-1]

    deltas = []
    for share in (True, False):
        monkeypatch.setattr(update_module, "shared_prompt", spy if share else lambda *args, **kwargs: None)
        cfg = load_config("recipes/tiny.yaml", [f"rl.optim.micro_batch_rows={rows}", "rl.optim.lr=1.0",
                                                "hindsight.coef=0.5"])
        model = tiny_model(tokenizer, seed=0).eval()
        before = {n: p.detach().clone() for n, p in model.named_parameters()}
        update(model, torch.optim.SGD(model.parameters(), lr=1.0), groups, cfg, tokenizer.pad_token_id,
               corrections=corrections)
        deltas.append({n: p.detach() - before[n] for n, p in model.named_parameters()})
    assert len(built) == 1 and built[0] is not None
    assert any(d.abs().max() > 0 for d in deltas[0].values())
    for name, d in deltas[0].items():
        torch.testing.assert_close(d, deltas[1][name], rtol=1e-4, atol=1e-6, msg=name)


def _ragged(group: TrajectoryGroup, long_rows: int, extra: int) -> TrajectoryGroup:
    """The group with the final action of its first `long_rows` rows made `extra` tokens longer."""
    trajs = []
    for i, t in enumerate(group.trajectories):
        if i < long_rows:
            last = t.turns[-1]
            ids = last.action_ids + tuple(range(600, 600 + extra))
            t = Trajectory(t.task, (*t.turns[:-1], replace(last, action_ids=ids, logprobs=(-1.0,) * len(ids))),
                           reward=t.reward)
        trajs.append(t)
    return TrajectoryGroup(group.task, tuple(trajs))


def test_a_ragged_group_is_split_by_length_and_gives_the_same_update(tokenizer, make_group, with_questions,
                                                                    monkeypatch):
    """A group of 8 with three rows 40 tokens longer than the others is forwarded as two micro-batches
    (5 short rows, 3 long) instead of 8 rows padded to the longest; a group of equal lengths is not
    split. The loss is a sum over rows with the minibatch's normalizer: the same update (SGD at lr
    1, so the update is the gradient; fp32)."""
    from agentic_rl.models.loader import tiny_model
    from agentic_rl.trainer import update as update_module

    gen = torch.Generator().manual_seed(11)
    rewards = [[1.0, 0.0, 0.0, 1.0, 0.0, 1.0, 0.0, 0.0], [0.0, 1.0, 1.0, 0.0, 0.0, 0.0, 1.0, 0.0]]
    even, ragged = with_questions([make_group(0, rewards[0], gen), _ragged(make_group(1, rewards[1], gen), 3, 40)])
    split = split_ragged([[GroupWork(even, [None] * 8)], [GroupWork(ragged, list(range(8)))]])
    assert [len(m[0].group.trajectories) for m in split] == [8, 5, 3]
    assert sorted(split[1][0].advantages + split[2][0].advantages) == list(range(8))
    assert split[2][0].advantages == [0, 1, 2]
    deltas, micros = [], []

    def spy(parts):
        micros.append(len(split_ragged(parts)))
        return split_ragged(parts)

    for splitting in (spy, lambda parts: parts):
        monkeypatch.setattr(update_module, "split_ragged", splitting)
        cfg = load_config("recipes/tiny.yaml", ["rl.optim.lr=1.0", "rl.optim.pack=false"])  # split_ragged is the padded layout's
        model = tiny_model(tokenizer, seed=0).eval()
        before = {n: p.detach().clone() for n, p in model.named_parameters()}
        update(model, torch.optim.SGD(model.parameters(), lr=1.0), [even, ragged], cfg, tokenizer.pad_token_id)
        deltas.append({n: p.detach() - before[n] for n, p in model.named_parameters()})
    assert micros == [3]
    assert any(d.abs().max() > 0 for d in deltas[0].values())
    for name, d in deltas[0].items():
        torch.testing.assert_close(d, deltas[1][name], rtol=1e-4, atol=1e-6, msg=name)


def _update(tiny, tokenizer, make_group, minibatches: int, rewards: list[list[float]]):
    cfg = load_config("recipes/tiny.yaml", [f"rl.optim.minibatches={minibatches}", "rl.optim.lr=1e-3"])
    gen = torch.Generator().manual_seed(0)
    groups = [make_group(i, r, gen) for i, r in enumerate(rewards)]
    opt = torch.optim.AdamW(tiny.parameters(), lr=cfg.rl.optim.lr)
    return update(tiny, opt, groups, cfg, tokenizer.pad_token_id)


def test_minibatches_take_one_optimizer_step_each_and_skip_groups_without_spread(tiny, tokenizer, make_group):
    rewards = [[1.0, 0.0, 0.0, 1.0], [1.0, 1.0, 1.0, 1.0], [0.0, 1.0, 0.0, 0.0], [0.1, 1.0, 1.0, 0.1]]
    m = _update(tiny, tokenizer, make_group, 2, rewards)
    assert m["groups_trained"] == 3  # the all-equal group has zero advantage: dropped
    assert m["optimizer_steps"] == 2
    assert m["trained_tokens"] == 3 * 4 * 10  # 3 groups x 4 samples x (6 + 4) sampled tokens


def test_single_minibatch_is_on_policy(tiny, tokenizer, make_group):
    # One minibatch: the behaviour policy is the current one, so no token can be clipped.
    m = _update(tiny, tokenizer, make_group, 1, [[1.0, 0.0, 0.0, 1.0], [0.0, 1.0, 0.0, 0.0]])
    assert m["optimizer_steps"] == 1 and m["clip_frac"] == 0.0


def test_no_spread_anywhere_trains_nothing(tiny, tokenizer, make_group):
    before = {k: v.clone() for k, v in tiny.state_dict().items()}
    m = _update(tiny, tokenizer, make_group, 2, [[1.0] * 4, [0.0] * 4])
    assert m["optimizer_steps"] == 0 and m["trained_tokens"] == 0
    assert all(torch.equal(v, tiny.state_dict()[k]) for k, v in before.items())


def test_estimators_from_the_recipe_give_per_token_credit_on_sampled_tokens_only(make_group):
    gen = torch.Generator().manual_seed(1)
    groups = [make_group(0, [1.0, 0.0, 0.0, 0.0], gen)]
    for name in ("grpo", "dr_grpo", "rloo", "reinforce_pp", "reinforce_pp_baseline"):
        cfg = load_config("recipes/tiny.yaml", [f"rl.algorithm.advantage={name}"])
        advs = compute_advantages(groups, cfg.rl.algorithm)
        for t, a in zip(groups[0].trajectories, advs):
            assert a.shape == (len(t.token_ids()),)
            assert not a[torch.tensor(t.loss_mask()) == 0].any()
    # RLOO by hand: sample 0 has r=1, the others' mean is 0 -> +1; sample 1: r=0 - (1+0+0)/3 = -1/3.
    advs = compute_advantages(groups, load_config("recipes/tiny.yaml", ["rl.algorithm.advantage=rloo"]).rl.algorithm)
    assert float(advs[0].max()) == 1.0 and abs(float(advs[1].min()) + 1 / 3) < 1e-6


def test_per_turn_rewards_reach_the_turn_they_belong_to(make_group):
    # Two samples with equal outcomes (Dr.GRPO outcome part 0), but sample 0's first turn earned a
    # process reward of 1. Turn rewards are centred over the group's 4 turns (mean 1/4): sample 0
    # gets +0.75 at turn 0 and -0.25 at turn 1, sample 1 gets -0.25 at both. Credit is reward-to-go
    # over sampled tokens: turn 0's tokens see their own turn's reward and every later one's.
    gen = torch.Generator().manual_seed(2)
    group = make_group(0, [1.0, 1.0], gen)
    t0 = group.trajectories[0]
    rewarded = Trajectory(t0.task, (replace(t0.turns[0], reward=1.0), t0.turns[1]), reward=1.0)
    group = TrajectoryGroup(group.task, (rewarded, group.trajectories[1]))
    cfg = load_config("recipes/tiny.yaml", ["rl.algorithm.advantage=dr_grpo"])
    adv0, adv1 = compute_advantages([group], cfg.rl.algorithm)
    turn0 = slice(10, 16)  # 10 prompt ids, then turn 0's 6 sampled ids
    assert torch.allclose(adv0[turn0], torch.full((6,), 0.75 - 0.25))
    assert torch.allclose(adv0[16 + 3 :], torch.full((4,), -0.25))  # turn 1, after 3 observation ids
    assert torch.allclose(adv1[turn0], torch.full((6,), -0.5))
    assert not adv0[16:19].any()  # the observation between the turns gets no credit


COMBOS = ([(a, "ppo_clip", "token-mean") for a in ("grpo", "dr_grpo", "rloo", "reinforce_pp", "reinforce_pp_baseline")]
          + [("grpo", loss, "token-mean") for loss in ("gspo", "cispo")]
          + [("grpo", "ppo_clip", agg) for agg in ("seq-mean-token-mean", "seq-mean-token-sum-norm")])


@pytest.mark.parametrize("advantage, loss, aggregation", COMBOS)
def test_every_registered_algorithm_trains_through_the_trainer(tiny, tokenizer, advantage, loss, aggregation, make_group):
    """The recipe names reach the registries, and a step moves the weights with a finite loss."""
    cfg = load_config("recipes/tiny.yaml", [f"rl.algorithm.advantage={advantage}", f"rl.algorithm.policy_loss={loss}",
                                            f"rl.algorithm.aggregation={aggregation}", "rl.optim.lr=1e-3", "rl.optim.minibatches=2"])
    gen = torch.Generator().manual_seed(3)
    groups = [make_group(i, r, gen) for i, r in enumerate([[1.0, 0.0, 0.0, 1.0], [0.0, 0.0, 1.0, 0.1]])]
    before = {k: v.clone() for k, v in tiny.state_dict().items()}
    opt = torch.optim.AdamW(tiny.parameters(), lr=cfg.rl.optim.lr)
    m = update(tiny, opt, groups, cfg, tokenizer.pad_token_id)
    assert m["optimizer_steps"] == 2 and math.isfinite(m["loss"]) and math.isfinite(m["grad_norm"])
    assert not torch.equal(before["lm_head.weight"], tiny.state_dict()["lm_head.weight"])


def test_entropy_bonus_raises_entropy_when_there_is_no_reward_signal(tiny, tokenizer, make_group):
    # Equal rewards: the policy-gradient term is 0, so the only force is the bonus -coef * H.
    cfg = load_config("recipes/tiny.yaml", ["rl.algorithm.entropy_coef=1.0", "rl.optim.lr=1e-2"])
    gen = torch.Generator().manual_seed(4)
    groups = [make_group(0, [1.0] * 4, gen)]
    with torch.no_grad():  # a random model is near maximal entropy; sharpen it so H has room to rise
        tiny.model.norm.weight.mul_(30.0)
    opt = torch.optim.AdamW(tiny.parameters(), lr=cfg.rl.optim.lr)
    entropies = [update(tiny, opt, groups, cfg, tokenizer.pad_token_id)["entropy"]
                 for _ in range(4)]
    assert entropies[-1] > entropies[0]


def _plain_logprobs(model, t: Trajectory) -> torch.Tensor:
    """log p(token_t | tokens before it) for every token of `t` by one plain forward (no prefix
    sharing, no cache), 0 at position 0."""
    ids = torch.tensor([t.token_ids()])
    with torch.no_grad():
        logp = torch.log_softmax(model(ids).logits[0, :-1].float(), -1).gather(1, ids[0, 1:, None])[:, 0]
    return torch.cat([torch.zeros(1), logp])


def _sampled_by(groups, logprobs_of):
    """The groups with each action's stored (sampler) logprobs replaced by logprobs_of(t)[positions]."""
    out = []
    for g in groups:
        trajs = []
        for t in g.trajectories:
            lp, at, turns = logprobs_of(t), 0, []
            for turn in t.turns:
                at += len(turn.obs_ids)
                turns.append(replace(turn, logprobs=tuple(float(x) for x in lp[at : at + len(turn.action_ids)])))
                at += len(turn.action_ids)
            trajs.append(replace(t, turns=tuple(turns)))
        out.append(TrajectoryGroup(g.task, tuple(trajs)))
    return out


@pytest.mark.parametrize("mode", ["tis", "mis", "none"])
def test_a_perturbed_sampler_is_corrected_as_computed_by_hand(tiny, tokenizer, make_group, mode):
    """The sampler's logprobs are the trainer's shifted by d ~ U(-1, 1) per token. One on-policy step
    (ratio 1, so PPO's per-token loss is -A): the loss is -(1/N) sum_t w_t A_t with w_t from a plain
    forward, w = pi_trainer / mu: min(w, 2) for tis, w inside [1/2, 2] else 0 for mis, 1 for none;
    mismatch_logprob_abs_mean is mean |d|. With d = 0 every mode gives the uncorrected loss."""
    from agentic_rl.trainer.credit import compute_advantages

    gen = torch.Generator().manual_seed(12)
    groups = [make_group(i, r, gen) for i, r in enumerate([[1.0, 0.0, 0.5], [0.0, 1.0, 1.0]])]
    shifts = {id(t): torch.rand(len(t.token_ids()), generator=gen) * 2 - 1 for g in groups for t in g.trajectories}
    exact = _sampled_by(groups, lambda t: _plain_logprobs(tiny, t))
    perturbed = _sampled_by(groups, lambda t: _plain_logprobs(tiny, t) - shifts[id(t)])
    cfg = load_config("recipes/tiny.yaml", [f"rl.rollout_correction.mode={mode}"])
    adv = compute_advantages(groups, cfg.rl.algorithm)
    weight = {"tis": lambda w: w.clamp(max=2.0), "mis": lambda w: w * ((w >= 0.5) & (w <= 2.0)),
              "none": lambda w: torch.ones_like(w)}[mode]
    total, n, gap = 0.0, 0, 0.0
    for g, a_rows in zip(groups, [adv[:3], adv[3:]]):
        for t, a in zip(g.trajectories, a_rows):
            m = torch.tensor(t.loss_mask(), dtype=torch.bool)
            d = shifts[id(t)][m]
            total += float((weight(torch.exp(d)) * a[m]).sum())
            n, gap = n + int(m.sum()), gap + float(d.abs().sum())
    opt = torch.optim.SGD(tiny.parameters(), lr=0.0)
    m = update(tiny, opt, perturbed, cfg, tokenizer.pad_token_id, adv)
    assert m["loss"] == pytest.approx(-total / n, rel=1e-4, abs=1e-7)
    assert m["mismatch_logprob_abs_mean"] == pytest.approx(gap / n, rel=1e-4)
    plain = update(tiny, opt, exact, cfg, tokenizer.pad_token_id, adv)
    uncorrected = -sum(float(a[torch.tensor(t.loss_mask(), dtype=torch.bool)].sum())
                       for g, rows in zip(groups, [adv[:3], adv[3:]]) for t, a in zip(g.trajectories, rows)) / n
    assert plain["loss"] == pytest.approx(uncorrected, rel=1e-4, abs=1e-7)
    assert plain["mismatch_logprob_abs_mean"] < 1e-5 and plain["correction_clipped_frac"] == 0.0


def test_a_second_epoch_clips_against_the_trainer_before_the_update(tiny, tokenizer, make_group):
    """Two epochs over one batch, SGD at lr 1000 (the gradient is clipped to norm 1, so the step is
    1000 in norm: a random tiny model needs it to move its logprobs): the first pass is on-policy (ratio exactly 1,
    nothing clipped); the second runs on weights one step further, and its ratio's denominator is the
    trainer's logprob before the update — equal to a plain forward of the untouched model — not the
    sampler's (make_group stores -1 for every sampled token). The clip fraction reported is the count
    of that ratio outside [0.8, 1.2] in the advantage's direction, by hand, and it is not 0."""
    from agentic_rl.trainer.batching import batch_layout, make_batch
    from agentic_rl.trainer.credit import Credit, compute_advantages
    from agentic_rl.trainer.loss_terms import PolicyTerm, build_loss
    from agentic_rl.trainer.update import UpdateBatch, rl_update
    from agentic_rl.types import RolloutBatch

    gen = torch.Generator().manual_seed(21)
    groups = [make_group(0, [1.0, 0.0, 0.0, 1.0], gen)]
    cfg = load_config("recipes/tiny.yaml", ["rl.optim.epochs=2", "rl.optim.lr=1000"])
    before = [_plain_logprobs(tiny, t) for t in groups[0].trajectories]
    seen = []
    loss = build_loss(cfg, tiny)
    term = loss.terms[0]

    def spy(x):
        seen.append(x)
        return term.loss(x)

    loss = replace(loss, terms=(PolicyTerm(loss=spy, aggregate=term.aggregate, clip_low=term.clip_low,
                                           clip_high=term.clip_high),))
    adv = compute_advantages(groups, cfg.rl.algorithm)
    m = rl_update(tiny, torch.optim.SGD(tiny.parameters(), lr=1000), UpdateBatch(RolloutBatch(tuple(groups)), Credit(adv)),
                  loss, cfg.rl.optim, tokenizer.pad_token_id).metrics
    first, second = seen
    mask = first.loss_mask_BT.bool()
    assert torch.equal(first.logprobs_BT.detach()[mask], first.old_logprobs_BT[mask])  # ratio exactly 1
    batch = make_batch(groups[0].trajectories, tokenizer.pad_token_id)
    torch.testing.assert_close(second.old_logprobs_BT[mask], batch_layout(before, batch)[mask], atol=1e-5, rtol=0)
    ratio = torch.exp(second.logprobs_BT.detach() - second.old_logprobs_BT)
    adv_BT = second.advantages_BT
    low = int((mask & (ratio < 0.8) & (adv_BT < 0)).sum())
    high = int((mask & (ratio > 1.2) & (adv_BT > 0)).sum())
    assert low + high > 0
    tokens = 2 * int(mask.sum())
    assert m["clip_frac_low"] == pytest.approx(low / tokens) and m["clip_frac_high"] == pytest.approx(high / tokens)


def test_a_trajectory_whose_context_started_over_trains_each_context_as_its_own_row(tokenizer, make_group):
    """One episode restarted (`Turn.restart`: its second turn is fed a whole new prompt). It stays one
    sample of its group and trains in one row of two segments. The update must be the gradient of
    -(1/N) sum_t A_t log p(token_t | its own context), each context forwarded alone by a plain
    forward (no cache, no prefix sharing); one on-policy step of SGD, lr 1, no correction, so the
    update is minus that gradient. A row whose second context attended to the first would differ."""
    from agentic_rl.models.loader import tiny_model

    gen = torch.Generator().manual_seed(21)
    groups = [make_group(i, r, gen) for i, r in enumerate([[1.0, 0.0, 0.5], [0.0, 1.0, 1.0]])]
    t = groups[0].trajectories[1]
    restarted = replace(t, turns=(t.turns[0], replace(t.turns[1], obs_ids=(*range(10, 20), 77, 78), restart=True)))
    groups[0] = TrajectoryGroup(groups[0].task, (groups[0].trajectories[0], restarted, groups[0].trajectories[2]))
    cfg = load_config("recipes/tiny.yaml", ["rl.rollout_correction.mode=none", "rl.optim.lr=1.0", "rl.optim.max_grad_norm=1e9"])
    adv = compute_advantages(groups, cfg.rl.algorithm)
    assert restarted.restarts == 1 and len(adv) == 6  # one sample, one advantage row, of its group

    model = tiny_model(tokenizer, seed=0).eval()
    total, n = 0.0, 0
    for t, a in zip([t for g in groups for t in g.trajectories], adv):
        at = 0
        for row in t.contexts():
            ids = torch.tensor([row.token_ids()])
            logp = torch.log_softmax(model(ids).logits[0, :-1].float(), -1).gather(1, ids[0, 1:, None])[:, 0]
            m = torch.tensor(row.loss_mask()[1:], dtype=torch.bool)
            total = total + (a[at + 1 : at + len(row.token_ids())][m] * logp[m]).sum()
            n, at = n + int(m.sum()), at + len(row.token_ids())
    (-total / n).backward()
    want = -model.lm_head.weight.grad.clone()

    model = tiny_model(tokenizer, seed=0).eval()
    before = model.lm_head.weight.detach().clone()
    m = update(model, torch.optim.SGD(model.parameters(), lr=1.0), groups, cfg, tokenizer.pad_token_id, adv)
    assert m["trained_tokens"] == n == 6 * 10
    got = model.lm_head.weight.detach() - before
    assert want.abs().max() > 0
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-7)


def test_the_logged_loss_is_the_objective_optimized_hindsight_included(tokenizer, make_group):
    """A step whose groups have no reward spread trains only its hindsight corrections: the logged
    loss is coef x their token-mean NLL (by a plain forward), not 0 beside a non-zero gradient."""
    from agentic_rl.models.loader import tiny_model

    gen = torch.Generator().manual_seed(5)
    groups = [make_group(0, [0.0, 0.0, 0.0], gen)]  # no spread: no policy-gradient rows
    corrections = make_group(9, [1.0], gen).trajectories
    cfg = load_config("recipes/tiny.yaml", ["hindsight.coef=0.5"])
    model = tiny_model(tokenizer, seed=0).eval()
    ids = torch.tensor([corrections[0].token_ids()])
    mask = torch.tensor(corrections[0].loss_mask(), dtype=torch.bool)[1:]
    with torch.no_grad():
        logp = torch.log_softmax(model(ids).logits[0, :-1].float(), -1).gather(1, ids[0, 1:, None])[:, 0]
    nll = -logp[mask].mean().item()
    m = update(model, torch.optim.SGD(model.parameters(), lr=0.0), groups, cfg, tokenizer.pad_token_id,
               corrections=corrections)
    assert m["grad_norm"] > 0 and m["trained_tokens"] == 0
    # 1e-4 relative: one fp32 forward of a ~10-nat NLL by two kernel paths
    assert m["loss"] == pytest.approx(0.5 * nll, rel=1e-4) and m["hindsight_nll"] == pytest.approx(nll, rel=1e-4)
