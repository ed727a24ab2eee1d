"""Padding-free RL micro-batches (`trainer/batching.py`'s `PackedRows`, `rl.optim.pack`) and
micro-batches sized by tokens: the packed forward gives the padded forward's numbers, and the update
does not depend on how its groups are cut into micro-batches."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from agentic_rl.models.forward import policy_forward
from agentic_rl.models.loader import enable_gradient_checkpointing, tiny_model
from agentic_rl.models.memory import micro_batch_tokens
from agentic_rl.trainer.batching import make_batch
from agentic_rl.trainer.config import load_config
from agentic_rl.trainer.update import GroupWork, group_tokens, micro_batches, within_tokens
from agentic_rl.types import Task, Trajectory, TrajectoryGroup, Turn
from tests.helpers import update
from tests.models.test_forward import _restarted_rows


def _ids(gen, n: int) -> tuple[int, ...]:
    return tuple(int(x) for x in torch.randint(100, 5000, (n,), generator=gen))


def _long_tail_group(gen, task: int = 0, prompt: tuple[int, ...] = tuple(range(10, 22)),
                     actions=((2, 1, 1), (40, 9, 3), (250, 20, 30), (5, 2, 1))) -> TrajectoryGroup:
    """A group sharing `prompt`, two turns a row (an observation between the actions), its rows' own
    tokens 4 to 300: padded, the shortest row would be 98% padding."""
    trajs = []
    for n_action, n_obs, n_final in actions:
        turns = (Turn(prompt, _ids(gen, n_action), (-1.0,) * n_action, "a", "stop"),
                 Turn(_ids(gen, n_obs), _ids(gen, n_final), (-1.0,) * n_final, "b", "eos"))
        trajs.append(Trajectory(Task(str(task), "p"), turns, reward=float(n_action % 2)))
    return TrajectoryGroup(Task(str(task), "p"), tuple(trajs))


def _grads(model) -> dict[str, torch.Tensor]:
    return {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


def _assert_close_to_scale(got: dict[str, torch.Tensor], want: dict[str, torch.Tensor], rel: float = 1e-5) -> None:
    """Every weight's gradient within `rel` of its largest entry. fp32 sums in another order: a
    forward's gradients measured at most 1.1e-6 of it; a gradient of rows attending across each
    other differs by ~1e-2."""
    assert got.keys() == want.keys() and len(want) > 2
    for name, g in want.items():
        assert (got[name] - g).abs().max() <= rel * g.abs().max(), name


@pytest.mark.parametrize("checkpointed", [False, True])
def test_the_packed_forward_gives_the_padded_outputs_and_gradients(tokenizer, checkpointed):
    """Rows of 4 to 300 tokens of their own after a 12-token prompt: forwarded back to back in one
    row (the prompt's cache read once by every row), the logprobs, entropy, critic values and whole
    distributions (what a teacher's and distillation's terms read) at the trained positions, and
    the gradient of a loss of logprobs and values, are the padded forward's; the logprobs are also
    those of each row forwarded alone, whole (an independent computation).

    Tolerance: fp32 rounding of the same sums in another order (a row's attention over its own keys
    rather than over the padded width with masked zeros; the products for short segments, SDPA for
    the long one): measured 0 to 1e-6 on logprobs of about -8.5 (a few units in the last place),
    and 1.1e-6 of a weight's largest gradient entry. Attention that leaked across rows moves the
    logprobs by ~1e-2."""
    group = _long_tail_group(torch.Generator().manual_seed(3))
    model = tiny_model(tokenizer, seed=0)
    if checkpointed:
        enable_gradient_checkpointing(model)
    model.train()
    head = torch.nn.Linear(model.config.hidden_size, 1)
    padded = make_batch(group.trajectories, pad_id=0)
    packed = make_batch(group.trajectories, pad_id=0, pack=True)
    assert len(padded.prefix_ids) == 12 and padded.input_ids.shape == (4, 300)
    assert packed.packed.input_ids.shape == (1, sum(len(t.token_ids()) - 12 for t in group.trajectories))
    for name in ("input_ids", "loss_mask", "advantages", "sampler_logprobs"):  # the (B, T) rows the terms read
        assert torch.equal(getattr(packed, name), getattr(padded, name)), name
    weights = torch.rand(padded.input_ids.shape, generator=torch.Generator().manual_seed(0))

    def run(batch):
        model.zero_grad(set_to_none=True)
        head.zero_grad(set_to_none=True)
        out = policy_forward(model, batch, value_head=head, full=True)
        ((out.logprobs + out.values) * weights).sum().backward()
        return out, {**_grads(model), "head": head.weight.grad.clone()}

    (out, grads), (ref, grads_ref) = run(packed), run(padded)
    for name in ("logprobs", "values", "full"):
        torch.testing.assert_close(getattr(out, name), getattr(ref, name), atol=1e-5, rtol=0, msg=name)
    # the entropy, a sum over the 49k-token vocabulary, rounds more: measured 1.05e-5 of 10.8 (11 ulps)
    torch.testing.assert_close(out.entropy, ref.entropy, atol=3e-5, rtol=0)
    _assert_close_to_scale(grads, grads_ref)
    sel = padded.loss_mask.bool()
    with torch.no_grad():
        alone = []
        for t in group.trajectories:
            ids = torch.tensor([t.token_ids()])
            lp = torch.log_softmax(model(input_ids=ids).logits[0, :-1].float(), -1).gather(1, ids[0, 1:, None])[:, 0]
            alone.append(lp[torch.tensor(t.loss_mask()[1:], dtype=torch.bool)])
    torch.testing.assert_close(out.logprobs[sel].detach(), torch.cat(alone), atol=1e-5, rtol=0)


def test_packed_rows_of_several_contexts_give_the_padded_logprobs_and_gradients(tokenizer):
    """Real episodes of 1, 2 and 3 contexts (the calculator's demonstrations started over with
    `Turn.restart`, 420 to 1,400 tokens): packed into one 2,758-token row of six segments, the
    logprobs and gradients equal the padded rows' (3 x 1,469). Tolerance as in the test above; both
    of the segment attention's ways run (contexts of 400-520 tokens)."""
    rows = _restarted_rows(tokenizer)
    padded, packed = make_batch(rows, tokenizer.pad_token_id), make_batch(rows, tokenizer.pad_token_id, pack=True)
    assert padded.input_ids.shape == (3, 1469) and packed.packed.input_ids.shape == (1, 2758)
    assert int(packed.packed.segment_ids.max()) == 5
    model = tiny_model(tokenizer, seed=0).train()
    weights = torch.rand(padded.input_ids.shape, generator=torch.Generator().manual_seed(0))

    def run(batch):
        model.zero_grad(set_to_none=True)
        lp = policy_forward(model, batch).logprobs
        (lp * weights).sum().backward()
        return lp.detach(), _grads(model)

    (lp, grads), (lp_ref, grads_ref) = run(packed), run(padded)
    torch.testing.assert_close(lp, lp_ref, atol=1e-5, rtol=0)
    _assert_close_to_scale(grads, grads_ref)


def _groups(with_questions) -> list[TrajectoryGroup]:
    """Three groups with prompts of their own after a shared 20-token head (a system prompt), of
    long-tailed lengths, one of them truncated (DAPO's filter drops its tokens)."""
    gen = torch.Generator().manual_seed(5)
    groups = with_questions([_long_tail_group(gen, i, actions=a) for i, a in
                             enumerate([((2, 1, 1), (40, 9, 3), (120, 20, 30), (5, 2, 1)),
                                        ((7, 3, 2), (3, 1, 60), (9, 2, 2), (80, 5, 4)),
                                        ((30, 2, 2), (1, 1, 1), (4, 4, 4), (15, 3, 90))])])
    cut = groups[1].trajectories[3]
    groups[1] = replace(groups[1], trajectories=(*groups[1].trajectories[:3], replace(cut, truncated=True)))
    return groups


class _Recorder(torch.optim.SGD):
    """An optimizer whose step keeps the gradient it was given (and moves nothing)."""

    def step(self, closure=None):
        self.grads = {id(p): p.grad.clone() for g in self.param_groups for p in g["params"] if p.grad is not None}


def _update_grads(tokenizer, groups, options: list[str]) -> dict[str, torch.Tensor]:
    """The gradient of one update's optimizer step, fp32, per weight the loss reaches."""
    cfg = load_config("recipes/tiny.yaml", options)
    model = tiny_model(tokenizer, seed=0).eval()
    opt = _Recorder(model.parameters(), lr=1.0)
    update(model, opt, groups, cfg, tokenizer.pad_token_id)
    return {n: opt.grads[id(p)] for n, p in model.named_parameters() if id(p) in opt.grads}


@pytest.mark.parametrize("algorithm", [
    ["rl.algorithm.mask_truncated=true"],
    # a sequence-level ratio and per-sequence means: per-row quantities a packed row must keep apart
    ["rl.algorithm.policy_loss=gspo", "rl.algorithm.entropy_coef=0.1", "rl.rollout_correction.mode=geo_mask"],
])
def test_the_update_is_the_same_padded_packed_and_however_the_tokens_are_cut(tokenizer, with_questions,
                                                                          monkeypatch, algorithm):
    """The same minibatch trained padded (micro-batches by rows), packed into one micro-batch (a
    budget above the minibatch's tokens), and packed one group a micro-batch (a budget below two
    groups'; the step's system prompt then forwarded once for the three, `SharedPrompt`): the loss
    is a sum over rows with the minibatch's global normalizer, so the update is the same. Tolerance
    as in the forward tests above (fp32 sums in another order). Fails with the rows' segments
    merged (attention across rows) or the prompt's last hidden state not predicting each row's
    first token."""
    from agentic_rl.trainer import update as update_module

    groups = _groups(with_questions)
    sizes = [group_tokens(GroupWork(g, [])) for g in groups]
    seen = []

    def spy(*args, **kwargs):
        seen.append(len(micro_batches(*args, **kwargs)))
        return micro_batches(*args, **kwargs)

    monkeypatch.setattr(update_module, "micro_batches", spy)
    padded = _update_grads(tokenizer, groups, [*algorithm, "rl.optim.pack=false", "rl.optim.micro_batch_rows=4"])
    one = _update_grads(tokenizer, groups, [*algorithm, "rl.optim.pack=true", f"rl.optim.micro_batch_tokens={sum(sizes)}"])
    each = _update_grads(tokenizer, groups, [*algorithm, "rl.optim.pack=true", f"rl.optim.micro_batch_tokens={max(sizes)}"])
    assert seen == [3, 1, 3]  # padded: micro_batch_rows 4 is one group a micro-batch
    assert any(g.abs().max() > 0 for g in padded.values())
    # the policy gradient sums terms of both signs (advantages either side of 0): against its largest
    # entry its rounding is larger, measured at most 1.6e-5
    _assert_close_to_scale(one, padded, rel=1e-4)
    _assert_close_to_scale(each, padded, rel=1e-4)


def test_micro_batches_by_tokens_keep_groups_whole(make_group):
    """Groups fill a micro-batch up to the budget by `group_tokens` (the prompt once, each row's own
    tokens); a group over it is a micro-batch alone. The default budget is the memory estimate's
    largest micro-batch: two groups of 4 in 8 rows, a 512-token prompt each, 1,024 tokens a row."""
    gen = torch.Generator().manual_seed(0)
    work = [GroupWork(make_group(i, [0.0] * n, gen), []) for i, n in enumerate([2, 2, 4, 8, 2])]
    assert [group_tokens(w) for w in work] == [10 + 13 * n for n in (2, 2, 4, 8, 2)]  # 10 prompt, 13 own a row
    ids = lambda packed: [[int(w.group.task.id) for w in m] for m in packed]  # noqa: E731
    assert ids(micro_batches(work, 134, size=group_tokens)) == [[0, 1, 2], [3], [4]]
    assert ids(micro_batches(work, 133, size=group_tokens)) == [[0, 1], [2], [3], [4]]
    assert ids(micro_batches(work, 40, size=group_tokens)) == [[0], [1], [2], [3], [4]]
    assert micro_batch_tokens(4, 8, 1024) == 2 * 512 + 8 * 1024


@pytest.mark.parametrize("pack", [False, True])
def test_a_token_bound_cuts_a_long_group_into_parts_and_keeps_the_update(tokenizer, with_questions, monkeypatch, pack):
    """`rl.optim.micro_batch_tokens` below one group's tokens: the group is forwarded a few rows at a
    time (each part its prompt once and its rows' own tokens, within the bound, one row at least),
    padded or packed, and the update is the one of whole groups: the loss is a sum over rows with the
    minibatch's normalizer. Fails with a part's rows counted twice or dropped (the parts' rows are
    asserted to be the group's, in order)."""
    from agentic_rl.trainer import update as update_module

    groups = _groups(with_questions)
    w = GroupWork(groups[0], list(range(4)))
    sizes = [len(t.token_ids()) for t in groups[0].trajectories]
    bound = max(sizes) // 2  # the longest rows alone, the others a few together
    parts = within_tokens(w, bound)
    assert len(parts) > 1 and all(group_tokens(p) <= bound or len(p.group.trajectories) == 1 for p in parts)
    assert [a for p in parts for a in p.advantages] == list(range(4))
    assert within_tokens(w, group_tokens(w)) == [w]
    seen, real = [], update_module._micro_batches
    spy = lambda *a: seen.append(real(*a)) or seen[-1]  # noqa: E731
    monkeypatch.setattr(update_module, "_micro_batches", spy)
    whole = _update_grads(tokenizer, groups, ["rl.optim.micro_batch_rows=4", f"rl.optim.pack={pack}",
                                              f"rl.optim.micro_batch_tokens={10**6}"])
    cut = _update_grads(tokenizer, groups, ["rl.optim.micro_batch_rows=4", f"rl.optim.pack={pack}",
                                            f"rl.optim.micro_batch_tokens={bound}"])
    assert len(seen[1]) > len(seen[0])
    assert all(sum(map(group_tokens, m)) <= bound or sum(len(g.group.trajectories) for g in m) == 1 for m in seen[1])
    _assert_close_to_scale(cut, whole, rel=1e-4)
