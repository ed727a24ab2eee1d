"""The training forward pass (`models/forward.py`): under gradient checkpointing, and with the
step's common prompt forwarded once for all micro-batches (`SharedPrompt`)."""

from __future__ import annotations

import pytest
import torch

from agentic_rl.models.forward import policy_forward, shared_prompt, token_logprobs
from agentic_rl.models.loader import enable_gradient_checkpointing
from agentic_rl.trainer.batching import make_batch

HEAD = tuple(range(10, 30))  # the opening of `with_questions`'s prompts (tests/trainer/conftest.py)


def _logprobs_and_grads(model, batch):
    model.zero_grad()
    model.train()
    lp, _ = token_logprobs(model, batch)
    lp.sum().backward()
    return lp.detach(), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


def test_checkpointing_gives_the_same_logprobs_and_gradients(tiny, make_group):
    """Invariant: checkpointing changes memory and compute, never the numbers. A checkpointed layer
    drops the KV cache that carries a group's shared prompt to its rows, so the prompt is forwarded
    in every row instead; were it dropped silently, the rows would lose their prompt and every
    logprob would change."""
    group = make_group(0, [1.0, 0.0, 1.0], torch.Generator().manual_seed(0))
    batch = make_batch(group.trajectories, pad_id=0)
    assert batch.prefix_ids  # the group's prompt is shared, the case that needs care
    lp_plain, grads_plain = _logprobs_and_grads(tiny, batch)
    enable_gradient_checkpointing(tiny)
    lp_ckpt, grads_ckpt = _logprobs_and_grads(tiny, batch)
    assert torch.allclose(lp_plain, lp_ckpt, atol=1e-5)
    assert grads_plain.keys() == grads_ckpt.keys() and grads_plain
    for name, g in grads_plain.items():
        assert torch.allclose(g, grads_ckpt[name], atol=1e-5), name


def _grads(model):
    return {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("one_task", [False, True])
def test_shared_prompt_gives_the_same_logprobs_and_gradients(tiny, make_group, with_questions, one_task):
    """Invariant: forwarding the step's common prompt once, with its gradient collected over the
    micro-batches and sent back at the end, computes what each micro-batch forwarding it again
    computes. Were the collected gradient lost, the prompt's share of every weight's gradient
    would be missing; were the cache reused without it, the rows would see another prompt.
    `one_task`: every micro-batch has the same prompt (a group and a correction of its task), so
    the shared part is the whole prompt and its last hidden state predicts the first trained token."""
    gen = torch.Generator().manual_seed(1)
    groups = with_questions([make_group(i, [1.0, 0.0, 1.0], gen) for i in range(3)])
    if one_task:
        groups = [groups[0], *with_questions([make_group(0, [1.0, 0.0], gen)])]
    tiny.train()
    weights = [torch.rand(len(g.trajectories), 1, generator=gen) for g in groups]  # a different loss a row

    def run(shared):
        tiny.zero_grad(set_to_none=True)
        lps = []
        for g, w in zip(groups, weights):
            batch = make_batch(g.trajectories, pad_id=0)
            lp = policy_forward(tiny, batch, shared=shared).logprobs
            (lp * w).sum().backward()
            lps.append(lp.detach())
        if shared is not None:
            shared.backward()
        return lps, _grads(tiny)

    lp_plain, grads_plain = run(None)
    shared = shared_prompt(tiny, [g.trajectories for g in groups])
    whole = make_batch(groups[0].trajectories, pad_id=0).prefix_ids
    assert shared is not None and shared.ids == (whole if one_task else HEAD)  # not the questions, unless one task
    lp_shared, grads_shared = run(shared)
    for a, b in zip(lp_plain, lp_shared):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)
    assert grads_plain.keys() == grads_shared.keys() and grads_plain
    for name, g in grads_plain.items():
        torch.testing.assert_close(g, grads_shared[name], atol=1e-5, rtol=1e-4, msg=name)


def test_shared_prompt_only_where_it_saves_a_forward(tiny, make_group, with_questions):
    gen = torch.Generator().manual_seed(2)
    groups = with_questions([make_group(i, [1.0, 0.0], gen) for i in range(2)])
    assert shared_prompt(tiny, [g.trajectories for g in groups[:1]]) is None  # one micro-batch: nothing to share
    assert shared_prompt(tiny, [g.trajectories for g in groups], min_tokens=21) is None  # HEAD is 20 tokens
    # the same task in both micro-batches: their whole common prefix is shared, nothing left to forward
    same = shared_prompt(tiny, [groups[0].trajectories, groups[0].trajectories])
    assert same is not None and same.ids == make_batch(groups[0].trajectories, pad_id=0).prefix_ids
    enable_gradient_checkpointing(tiny)
    tiny.train()
    assert shared_prompt(tiny, [g.trajectories for g in groups]) is None  # a recompute would need its graph


def _ragged_group(gen):
    """A group sharing a 12-token prompt, whose rows are 5 to 23 tokens long after it and have two
    turns each (an observation between the actions): ragged rows, padded differently in a batch."""
    from agentic_rl.types import Task, Trajectory, TrajectoryGroup, Turn

    prompt = tuple(range(10, 22))
    trajs = []
    for n_action, n_obs, n_final in [(2, 1, 2), (6, 3, 4), (9, 5, 9), (4, 2, 1)]:
        ids = lambda n: tuple(int(x) for x in torch.randint(100, 5000, (n,), generator=gen))  # noqa: E731
        turns = (Turn(prompt, ids(n_action), (-1.0,) * n_action, "a", "stop"),
                 Turn(ids(n_obs), ids(n_final), (-1.0,) * n_final, "b", "eos"))
        trajs.append(Trajectory(Task("0", "p"), turns, reward=0.0))
    return TrajectoryGroup(Task("0", "p"), tuple(trajs))


@pytest.mark.parametrize("checkpointed", [False, True])
def test_shared_prefix_training_has_the_gradient_of_plain_per_row_forwards(tokenizer, checkpointed):
    """The trainer forwards a group's prompt once and its rows against the repeated cache; the loss
    sum_rows sum_t log p(sampled token) must have the gradient of forwarding each row alone, whole,
    with no cache and no padding — an independent computation. Ragged rows, fp32, with and without
    gradient checkpointing."""
    from agentic_rl.models.loader import tiny_model

    group = _ragged_group(torch.Generator().manual_seed(3))
    model = tiny_model(tokenizer, seed=0)
    if checkpointed:
        enable_gradient_checkpointing(model)
    model.train()
    batch = make_batch(group.trajectories, pad_id=0)
    assert len(batch.prefix_ids) == 12
    lp, _ = token_logprobs(model, batch)
    lp.sum().backward()
    shared = _grads(model)
    model.zero_grad()
    for t in group.trajectories:  # the reference: each row alone, a plain causal-LM forward
        ids = torch.tensor([t.token_ids()])
        mask = torch.tensor(t.loss_mask(), dtype=torch.bool)[1:]
        logp = torch.log_softmax(model(input_ids=ids).logits[0, :-1].float(), -1).gather(1, ids[0, 1:, None])[:, 0]
        logp[mask].sum().backward()
    plain = _grads(model)
    assert shared.keys() == plain.keys() and shared
    for name, g in plain.items():
        torch.testing.assert_close(shared[name], g, atol=2e-5, rtol=1e-4, msg=name)
