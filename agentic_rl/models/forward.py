"""Model forward passes for training: per-token logprobs of a micro-batch, sharing its common prefix.

The rows of a GRPO micro-batch (the G samples of one task) share their prompt, usually most of each
row. The prefix is forwarded once, with gradient, and its KV cache is repeated for every row; only
the rows' own tokens are forwarded per row. This is exact (the gradient flows through the shared
prefix into every row) and cuts the training compute by the prompt's share of the tokens.

One level up, every task of a step opens with the same system prompt and tool schemas (288 of the
calculator's ~320 prompt tokens). `SharedPrompt` forwards that once for all the micro-batches of an
optimizer step, instead of once a micro-batch (a fifth of a step's training compute on the
calculator); its gradient is collected over the micro-batches and sent back through it once.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from contextlib import ExitStack, contextmanager, nullcontext
from typing import NamedTuple

import torch
from transformers import DynamicCache

from agentic_rl.models.attention import segment_attention, training_attention
from agentic_rl.models.device import device_of
from agentic_rl.models.kv import cache_kwarg, output_cache
from agentic_rl.models.vocab import chunked_token_logprobs, keeps_logits
from agentic_rl.types import Batch, Trajectory


def common_prefix_len(rows: Sequence[Sequence[int]], masks: Sequence[Sequence[int]]) -> int:
    """Longest common prefix of never-trained tokens, leaving every row at least one token of its own.

    The prefix is forwarded once and only its last position is turned into logits, so it must end
    before the first trained token of any row.
    """
    first_trained = min((m.index(1) if 1 in m else len(m)) for m in masks)
    limit = min(min(len(r) for r in rows) - 1, first_trained)
    n = 0
    while n < limit and all(r[n] == rows[0][n] for r in rows):
        n += 1
    return n


class PolicyOutputs(NamedTuple):
    logprobs: torch.Tensor  # (B, T), 0 off trained positions
    entropy: torch.Tensor  # (B, T), 0 off trained positions
    values: torch.Tensor | None  # (B, T) critic values V(s_t), 0 off trained positions; None without a head
    full: torch.Tensor | None = None  # (N, V) log-probabilities over the vocabulary at the N trained positions


def token_logprobs(model, batch: Batch, temperature: float = 1.0,
                   entropy_grad: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """(logprobs_BT, entropy_BT) of the trained tokens under `model` (see `policy_forward`)."""
    out = policy_forward(model, batch, temperature, entropy_grad)
    return out.logprobs, out.entropy


def policy_forward(model, batch: Batch, temperature: float = 1.0, entropy_grad: bool = False,
                   value_head=None, full: bool = False, shared: SharedPrompt | None = None) -> PolicyOutputs:
    """Logprobs, entropy and (with `value_head`) critic values of the trained tokens under `model`.
    The entropy is detached (a metric) unless `entropy_grad` (an entropy bonus in the loss); `full`
    also returns the whole distribution at the trained positions (on-policy distillation).

    Position t holds log p(input_ids[:, t] | prefix, input_ids[:, :t]) where loss_mask is 1, and 0
    elsewhere: the vocabulary projection and softmax (a fifth of the model's compute and most of its
    activation memory at a 49k vocabulary) run only on the positions that are trained, in chunks
    (`models/vocab.py`: no (N, V) tensor past a few thousand positions) unless the full distribution
    is asked for.
    The value at t comes from the same hidden state (the state before token t is sampled).
    """
    hidden = hidden_states(model, batch, shared)
    head = (model.get_base_model() if hasattr(model, "get_base_model") else model).get_output_embeddings()
    view = batch.packed if batch.packed is not None else batch  # the layout `hidden` is in
    ids, sel = view.input_ids[view.loss_mask.bool()], view.loss_mask.bool()
    logp = None
    grad_h = entropy_grad and torch.is_grad_enabled()
    plain = entropy_grad and keeps_logits(int(sel.sum()), head.weight.shape[0], head.weight.dtype)  # small: as it was
    if not (full or plain) and type(head) is torch.nn.Linear and head.bias is None:
        lp_N, entropy_N = chunked_token_logprobs(hidden[sel], head.weight, ids, temperature,
                                                 entropy_grad=grad_h)
    else:
        logp = torch.log_softmax(head(hidden[sel]).float() / temperature, dim=-1)  # (N, V), N trained tokens
        lp_N = logp.gather(-1, ids[:, None])[:, 0]
        with torch.set_grad_enabled(entropy_grad and torch.is_grad_enabled()):
            entropy_N = -(logp.exp() * logp).sum(-1)
    # the N trained tokens in the same order in both layouts: back into the batch's (B, T)
    out, shape = batch.loss_mask.bool(), batch.input_ids.shape
    token_lp = torch.zeros(shape, dtype=lp_N.dtype, device=out.device).masked_scatter(out, lp_N)
    entropy = torch.zeros(shape, device=out.device).masked_scatter(out, entropy_N)
    values = None
    if value_head is not None:
        values = torch.zeros(shape, device=out.device).masked_scatter(out, value_head(hidden[sel]).float())
    return PolicyOutputs(token_lp, entropy, values, logp if full else None)


def sequence_logprobs(model, ids: Sequence[int]) -> torch.Tensor:
    """(T - 1,) fp32 log p(ids[t] | ids[:t]) at temperature 1: one row forwarded whole, no cache
    (what a check of a sampler's weights compares: `HFEngine.score`, `engines/probe.py`)."""
    x = torch.tensor([list(ids)], device=device_of(model))
    logits = model(input_ids=x).logits[0, :-1].float()
    return torch.log_softmax(logits, dim=-1).gather(1, x[0, 1:, None])[:, 0]


class SharedPrompt:
    """The prompt every row of an optimizer step opens with, forwarded once (one row, with gradient)
    for all of the step's micro-batches.

    A micro-batch reads detached copies of the prompt's keys and values (`cache()`) and of its last
    hidden state (`last`, which predicts the first token after it); they collect their gradient over
    the micro-batches' backward passes, and `backward()` sends the sum through the prompt's own
    forward once. The gradient is the one the micro-batches would get each forwarding the prompt.
    """

    def __init__(self, model, ids: Sequence[int]):
        decoder = _decoder(model)
        out = decoder(input_ids=torch.tensor([list(ids)], device=device_of(decoder)), use_cache=True)
        self.ids = tuple(ids)
        self._graph = [t for layer in output_cache(out).layers for t in (layer.keys, layer.values)]
        self._graph.append(out.last_hidden_state[:, -1:])
        # keys and values of parameters that do not train (frozen ones, a LoRA base) need no gradient and have no graph
        self._leaves = [t.detach().requires_grad_(t.requires_grad) for t in self._graph]
        self.last = self._leaves[-1]

    def cache(self) -> DynamicCache:
        cache = DynamicCache()
        for i in range(len(self._leaves) // 2):
            cache.update(self._leaves[2 * i], self._leaves[2 * i + 1], i)
        return cache

    def covers(self, prefix_ids: Sequence[int]) -> bool:
        return tuple(prefix_ids[: len(self.ids)]) == self.ids

    def backward(self) -> None:
        pairs = [(t, leaf.grad) for t, leaf in zip(self._graph, self._leaves) if leaf.grad is not None]
        if pairs:
            torch.autograd.backward([t for t, _ in pairs], [g for _, g in pairs])


def shared_prompt(model, micro_rows: Sequence[Sequence[Trajectory]], min_tokens: int = 16) -> SharedPrompt | None:
    """A `SharedPrompt` for micro-batches of trajectories when it saves compute: two micro-batches or
    more, a common never-trained opening of at least `min_tokens`, and no gradient checkpointing
    (whose recompute would need the prompt's graph)."""
    if len(micro_rows) < 2 or _checkpointed(_decoder(model)):
        return None
    rows = [t.token_ids() for micro in micro_rows for t in micro]
    n = common_prefix_len(rows, [t.loss_mask() for micro in micro_rows for t in micro])
    return SharedPrompt(model, rows[0][:n]) if n >= min_tokens else None


def _decoder(model):
    return (model.get_base_model() if hasattr(model, "get_base_model") else model).get_decoder()


def hidden_states(model, batch: Batch, shared: SharedPrompt | None = None) -> torch.Tensor:
    """(B, T, H) final hidden states; hidden[:, t] predicts input_ids[:, t]. With `shared`, a prefix
    that opens with its prompt continues from the prompt's cache instead of forwarding it again.
    Attention runs as plain products where that is faster (`models/attention.py`), except under
    gradient checkpointing, whose recompute in the backward pass runs outside this call. Rows of
    several segments (`batch.segment_ids`) attend segment by segment, with or without checkpointing
    (`segment_attention`: no (T, T) mask), their positions restarting at each segment."""
    decoder = _decoder(model)
    checkpointed = _checkpointed(decoder)
    with nullcontext() if checkpointed else training_attention(decoder):
        return _hidden_states(decoder, batch, shared, checkpointed)


def _hidden_states(decoder, batch: Batch, shared: SharedPrompt | None, checkpointed: bool) -> torch.Tensor:
    if batch.packed is not None:
        return _packed_hidden_states(decoder, batch, shared, checkpointed)
    ids, attn = batch.input_ids, batch.attention_mask
    B = ids.shape[0]
    if batch.prefix_ids:
        cache, last = _prefix(decoder, batch.prefix_ids, shared if not checkpointed else None, checkpointed)
        cache.batch_repeat_interleave(B)
        if checkpointed:
            cache.__class__ = _FrozenPrefix  # same state; only `update` differs
        full_mask = torch.cat([torch.ones(B, len(batch.prefix_ids), dtype=attn.dtype, device=attn.device), attn], dim=1)
        with _flags(decoder.layers, _can_checkpoint_with_cache=True) if checkpointed else nullcontext():
            body = decoder(input_ids=ids, attention_mask=full_mask, use_cache=not checkpointed, **{cache_kwarg(decoder): cache})
        return torch.cat([last.expand(B, 1, -1), body.last_hidden_state[:, :-1]], dim=1)
    if batch.segment_ids is not None:
        spans, positions = segment_layout(batch.segment_ids)
        with segment_attention(decoder), _recomputed_under(decoder, segment_attention) if checkpointed else nullcontext():
            body = decoder(input_ids=ids, position_ids=positions, use_cache=False, segment_spans=spans)
    else:
        body = decoder(input_ids=ids, attention_mask=attn, use_cache=False)
    # token 0 of a row (or of a packed trajectory) has no prediction; it is prompt, never trained
    return torch.cat([body.last_hidden_state[:, :1], body.last_hidden_state[:, :-1]], dim=1)


def _packed_hidden_states(decoder, batch: Batch, shared: SharedPrompt | None, checkpointed: bool) -> torch.Tensor:
    """(1, W, H) hidden states of `batch.packed`, the rows back to back: every segment attends to the
    shared prefix's cache (one copy, not one a row) and causally to itself, its positions continuing
    from the prefix; a row's first token is predicted by the prefix's last hidden state."""
    packed, P = batch.packed, len(batch.prefix_ids)
    spans, positions = segment_layout(packed.segment_ids)
    past, last = {}, None
    if P:
        cache, last = _prefix(decoder, batch.prefix_ids, shared if not checkpointed else None, checkpointed)
        if checkpointed:
            cache.__class__ = _FrozenPrefix  # same state; only `update` differs
        past = {cache_kwarg(decoder): cache}
    with ExitStack() as stack:
        stack.enter_context(segment_attention(decoder))
        if checkpointed:
            stack.enter_context(_recomputed_under(decoder, segment_attention))
            stack.enter_context(_flags(decoder.layers, _can_checkpoint_with_cache=True))
        body = decoder(input_ids=packed.input_ids, position_ids=positions + P, use_cache=bool(P) and not checkpointed,
                       segment_spans=spans, **past).last_hidden_state
    hidden = torch.cat([body[:, :1], body[:, :-1]], dim=1)
    return hidden if last is None else torch.where(packed.starts[..., None], last, hidden)


def _prefix(decoder, prefix_ids: Sequence[int], shared: SharedPrompt | None, checkpointed: bool):
    """(KV cache, last hidden state) of a micro-batch's common prefix, one row: forwarded, or read
    from `shared` with only the tokens after it forwarded."""
    past = {}
    if shared is not None and shared.covers(prefix_ids):
        prefix_ids = prefix_ids[len(shared.ids) :]
        if not prefix_ids:
            return shared.cache(), shared.last
        past = {cache_kwarg(decoder): shared.cache()}
    with _flags([decoder, *decoder.layers], gradient_checkpointing=False) if checkpointed else nullcontext():
        ids = torch.tensor([list(prefix_ids)], device=device_of(decoder))
        first = decoder(input_ids=ids, use_cache=True, **past)  # cheap to keep
    return output_cache(first), first.last_hidden_state[:, -1:]


def _checkpointed(decoder) -> bool:
    """The decoder's layers recompute their forward in the backward pass (`model.gradient_checkpointing`).
    HF's wrapper then drops any KV cache (a replay would write it twice), so the shared prefix is
    passed as a `_FrozenPrefix`, which is never written."""
    return (decoder.training and torch.is_grad_enabled()
            and any(getattr(layer, "gradient_checkpointing", False) for layer in decoder.layers))


class _FrozenPrefix(DynamicCache):
    """The shared prefix's KV cache, served to a checkpointed body without ever growing: a
    checkpointed layer runs twice (the forward, then its recompute in the backward), and both runs
    must see the prefix and only the prefix."""

    def update(self, key_states, value_states, layer_idx: int, *args, **kwargs):
        layer = self.layers[layer_idx]
        return torch.cat([layer.keys, key_states], dim=-2), torch.cat([layer.values, value_states], dim=-2)


@contextmanager
def _flags(modules, **flags):
    """Set attributes on `modules` for the duration. HF reads `gradient_checkpointing` (on the decoder,
    which then turns `use_cache` off, and on each layer) and `_can_checkpoint_with_cache` (on each
    layer) at call time."""
    modules = list(modules)
    saved = [{k: getattr(m, k) for k in flags} for m in modules]
    for m in modules:
        for k, v in flags.items():
            setattr(m, k, v)
    try:
        yield
    finally:
        for m, old in zip(modules, saved):
            for k, v in old.items():
                setattr(m, k, v)


def segment_layout(segments: torch.Tensor) -> tuple[tuple[tuple[tuple[int, int], ...], ...], torch.Tensor]:
    """Rows of several segments ((B, T) segment index per token, -1 on padding) as the attention
    takes them: each row's runs of one segment as (start, end) spans (the padding a span of its own,
    attending only to itself), and positions restarting at each span's first token. O(B T): no mask."""
    T = segments.shape[1]
    starts = torch.ones_like(segments, dtype=torch.bool)
    starts[:, 1:] = segments[:, 1:] != segments[:, :-1]
    index = torch.arange(T, device=segments.device).expand_as(segments)
    first = torch.cummax(torch.where(starts, index, torch.zeros_like(index)), dim=1).values
    cuts = [[*torch.nonzero(row).flatten().tolist(), T] for row in starts.cpu()]
    spans = tuple(tuple(zip(c[:-1], c[1:])) for c in cuts)
    return spans, index - first


@contextmanager
def _recomputed_under(decoder, context):
    """Checkpointed layers recompute their forward in the backward pass, after this call has returned:
    `context(decoder)` (an attention implementation set for the forward) is entered for the recompute
    too, through torch's `checkpoint(context_fn=...)` (non-reentrant, as `enable_gradient_checkpointing` sets)."""
    recompute = lambda: (nullcontext(), context(decoder))  # noqa: E731
    with ExitStack() as stack:
        for layer in decoder.layers:
            f = functools.partial(layer._gradient_checkpointing_func, context_fn=recompute)
            stack.enter_context(_flags([layer], _gradient_checkpointing_func=f))
        yield
