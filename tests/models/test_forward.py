"""The training forward pass (`models/forward.py`): under gradient checkpointing, and with the
step's common prompt forwarded once for all micro-batches (`SharedPrompt`)."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from agentic_rl.models.forward import hidden_states, policy_forward, shared_prompt, token_logprobs
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


def _restarted_rows(tokenizer) -> list:
    """Real rows of several contexts: the calculator env's demonstrations (real prompts, tool calls and
    tool results through the real chat template and tokenizer, 400-520 tokens each) joined into
    episodes of 1, 2 and 3 contexts, each later one started over with a whole new prompt
    (`Turn.restart`), as a template that rewrites history or an agent that edits its own makes them."""
    from agentic_rl.envs.registry import get_env
    from agentic_rl.rollout.demos import demonstrate
    from agentic_rl.types import Trajectory

    spec = get_env("calculator")
    demos = [demonstrate(spec, {}, t, tokenizer)[1] for t in spec.tasks("train", 6, 0)]
    rows = []
    for parts in (demos[0:1], demos[1:3], demos[3:6]):
        turns = [dataclasses.replace(turn, restart=k > 0 and j == 0)
                 for k, d in enumerate(parts) for j, turn in enumerate(d.turns)]
        rows.append(Trajectory(parts[0].task, tuple(turns), reward=1.0))
    return rows


def _dense_logprobs(model, batch):
    """The reference: the row's attention as one dense (B, 1, T, T) additive mask (causal within a
    segment, nothing across; padding attends to itself), positions counted from each segment's first
    token, given whole to the model's decoder; then log p of every trained token."""
    from agentic_rl.models.attention import training_attention

    seg = batch.segment_ids
    B, T = seg.shape
    allowed = (seg[:, :, None] == seg[:, None, :]) & torch.ones(T, T, dtype=torch.bool).tril()
    mask = torch.zeros(B, 1, T, T).masked_fill(~allowed[:, None], torch.finfo(torch.float32).min)
    positions = torch.zeros(B, T, dtype=torch.long)
    for b in range(B):
        for t in range(1, T):
            positions[b, t] = positions[b, t - 1] + 1 if seg[b, t] == seg[b, t - 1] else 0
    decoder = model.get_decoder()
    with training_attention(decoder):
        hidden = decoder(input_ids=batch.input_ids, attention_mask=mask, position_ids=positions).last_hidden_state
    logits = model.get_output_embeddings()(hidden[:, :-1]).float()
    lp = torch.log_softmax(logits, -1).gather(-1, batch.input_ids[:, 1:, None])[..., 0]
    return lp[batch.loss_mask[:, 1:].bool()]


@pytest.mark.parametrize("checkpointed", [False, True])
def test_segment_attention_equals_the_dense_mask_on_real_restarted_rows(tokenizer, checkpointed):
    """Rows of 1, 2 and 3 contexts (420 to 1,400 tokens, ragged: padding too) trained with attention run
    segment by segment (no (T, T) mask) give the logprobs and gradients of the same rows given one
    dense block-diagonal mask. The contexts are 400-520 tokens, so both of the segment attention's
    ways run: the products (L^2 <= 512^2) and SDPA's causal kernel. Under gradient checkpointing the
    recompute in the backward pass must run the segment attention too: were it the model's stock
    attention, unmasked, the gradients would be of contexts attending to the ones before.

    Tolerance: fp32 rounding of the same sums taken in other orders (a 440-token segment's softmax
    and products over its 440 keys rather than over 1,469 with zeros; SDPA's kernel blocks them its
    own way): measured at most 1.9e-6 on logprobs of -9.5 to -11.3 (2 units in the last place there;
    the tolerance, 1e-5, is 10), and 2.7e-7 of a weight's largest gradient entry. A later context
    attending to the ones before it moves its logprobs by 0.017 on average (0.06 at most) on these
    rows: 1,700 times the tolerance."""
    from agentic_rl.models.loader import tiny_model

    rows = _restarted_rows(tokenizer)
    batch = make_batch(rows, tokenizer.pad_token_id)
    assert batch.segment_ids is not None and [t.restarts for t in rows] == [0, 1, 2]
    model = tiny_model(tokenizer, seed=0)
    if checkpointed:
        enable_gradient_checkpointing(model)
    model.train()
    weights = torch.rand(batch.input_ids.shape, generator=torch.Generator().manual_seed(0))  # a loss unlike the logprobs'

    def run(logprobs_of):
        model.zero_grad(set_to_none=True)
        lp = logprobs_of()
        (lp * weights[:, 1:][batch.loss_mask[:, 1:].bool()]).sum().backward()
        return lp.detach(), _grads(model)

    lp, grads = run(lambda: token_logprobs(model, batch)[0][:, 1:][batch.loss_mask[:, 1:].bool()])
    lp_ref, grads_ref = run(lambda: _dense_logprobs(model, batch))
    assert lp.numel() == sum(sum(t.loss_mask()) for t in rows)
    torch.testing.assert_close(lp, lp_ref, atol=1e-5, rtol=0)
    assert grads.keys() == grads_ref.keys() and grads
    for name, g in grads_ref.items():
        torch.testing.assert_close(grads[name], g, atol=1e-6, rtol=1e-4, msg=name)


def test_a_long_row_of_segments_makes_no_tensor_of_its_length_squared(tokenizer):
    """Memory grows with the segments, not as the row's T^2: in a 6,000-token row of three contexts
    forwarded through the decoder and back, no tensor any op makes holds T^2 / 16 elements (a (T, T)
    mask is 16 times that; at 8 rows of 40k tokens it would be 51 GB in fp32). The vocabulary head,
    whose (tokens, vocabulary) logits are no attention's, is left out, and so are the weights'
    gradients (the embedding's is 49,152 x 64)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    from agentic_rl.models.loader import tiny_model
    from agentic_rl.types import Task, Trajectory, Turn

    gen = torch.Generator().manual_seed(0)
    turns = tuple(Turn(tuple(torch.randint(100, 5000, (1500,), generator=gen).tolist()),
                       tuple(torch.randint(100, 5000, (500,), generator=gen).tolist()), (-1.0,) * 500, "a", "eos",
                       restart=k > 0) for k in range(3))
    batch = make_batch([Trajectory(Task("0", "p"), turns)], tokenizer.pad_token_id)
    T = batch.input_ids.shape[1]
    assert T == 6000 and batch.segment_ids is not None

    model = tiny_model(tokenizer, seed=0)
    model.train()
    weights = {p.shape for p in model.parameters()}

    class Largest(TorchDispatchMode):
        numel = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            for t in out if isinstance(out, (tuple, list)) else (out,):
                if isinstance(t, torch.Tensor) and t.shape not in weights:
                    Largest.numel = max(Largest.numel, t.numel())
            return out

    with Largest():
        hidden_states(model, batch).square().sum().backward()
    assert 0 < Largest.numel < T * T // 16, Largest.numel
