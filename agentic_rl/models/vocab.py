"""Logprobs and entropy of the trained tokens from the last hidden states, the vocabulary projection
in chunks: the (positions x vocabulary) logits and their log-softmax are never made whole.

At SmolLM2's 49k vocabulary the projection is a fifth of a forward's products, and the softmax around
it moved a (positions x vocabulary) fp32 tensor through six or seven whole-tensor ops forward and
back (a cast, the temperature, log-softmax, the exp and product of the entropy, the scatter of the
gradient): on the calculator recipe's update ~600 positions a micro-batch, 118 MB a tensor, every one
a fresh allocation that the CPU's allocator maps and faults in anew. Here the positions go in chunks
of `CHUNK`, small enough to be served from the heap, and the backward pass rebuilds each chunk's
softmax from its logits and its log-sum-exp.

What the backward pass starts from depends on the size. Up to `KEEP_LOGITS_BYTES` of logits (1,365
positions of SmolLM2 in fp32, 2,730 in bf16) the chunks' logits are kept from the forward pass; past
that (a long episode: 16k trained tokens would keep 3.2 GB) they are recomputed chunk by chunk in the
backward pass, one more (C, H) x (H, V) product a chunk, so the projection holds one chunk's
(C, V) tensors whatever the number of positions.

The math, for z = logits / T at one position, lse = logsumexp(z), log p = z - lse, p = softmax(z):

    lp  = z[target] - lse                     d lp / d z  = onehot(target) - p
    H   = -sum_j p_j log p_j = lse - p . z    d H  / d z_j = -p_j (log p_j + H)

(the second from d log p_j / d z_k = [j = k] - p_k and sum_j p_j = 1). With the upstream gradients
g_lp and g_H of a position, d z = onehot(target) g_lp - p (g_lp + g_H (log p + H)), and d logits =
d z / T. The values and the gradients are the plain path's (`torch.log_softmax` of the whole
projection) to fp32 rounding; the gradient of the entropy flows only when asked (an entropy bonus),
else it is a detached metric. A full distribution (on-policy distillation) takes the plain path in
`forward.py`.
"""

from __future__ import annotations

from contextlib import nullcontext

import torch

CHUNK = 128  # positions a chunk: 128 x 49,152 fp32 is 25 MB, under glibc's largest mmap threshold (32 MB)
KEEP_LOGITS_BYTES = 1 << 28  # 256 MiB: at most this many bytes of logits are kept for the backward pass


def keeps_logits(positions: int, vocab: int, dtype: torch.dtype) -> bool:
    """Whether the forward keeps its logits for the backward pass (else recomputes them there)."""
    return positions * vocab * torch.finfo(dtype).bits // 8 <= KEEP_LOGITS_BYTES


def _chunk_stats(raw: torch.Tensor, targets: torch.Tensor, temperature: float):
    """(z, lse, lp, entropy) of one chunk's logits `raw` (C, V): z in fp32, a fresh tensor."""
    z = raw.to(torch.float32, copy=True).div_(temperature)
    lse = torch.logsumexp(z, dim=-1)
    lp = z.gather(1, targets[:, None])[:, 0] - lse
    p = (z - lse[:, None]).exp_()
    return z, lse, lp, lse - torch.linalg.vecdot(p, z)


class _TokenLogprobs(torch.autograd.Function):
    @staticmethod
    def forward(ctx, hidden, weight, targets, temperature: float, dtype: torch.dtype, entropy_grad: bool,
                keep: bool):
        w = weight.to(dtype)
        logits, lses, lps, ents = [], [], [], []
        for start in range(0, hidden.shape[0], CHUNK):
            raw = hidden[start : start + CHUNK].to(dtype) @ w.t()  # (C, V) in the compute dtype
            _, lse, lp, ent = _chunk_stats(raw, targets[start : start + CHUNK], temperature)
            lps.append(lp)
            ents.append(ent)
            lses.append(lse)
            if keep:
                logits.append(raw)
        empty = hidden.new_zeros(0, dtype=torch.float32)
        lp_N, entropy_N = (torch.cat(lps), torch.cat(ents)) if lps else (empty, empty.clone())
        ctx.save_for_backward(hidden, w, targets, *logits)  # w: the cast, kept rather than made again
        ctx.lses, ctx.ents, ctx.temperature, ctx.dtype, ctx.weight_dtype = lses, ents, temperature, dtype, weight.dtype
        ctx.entropy_grad, ctx.keep = entropy_grad, keep
        if not entropy_grad:
            ctx.mark_non_differentiable(entropy_N)
        return lp_N, entropy_N

    @staticmethod
    def backward(ctx, grad_lp, grad_entropy):
        hidden, w, targets, *logits = ctx.saved_tensors
        T, dtype = ctx.temperature, ctx.dtype
        grad_hidden = hidden.new_empty(hidden.shape) if ctx.needs_input_grad[0] else None
        want_w = ctx.needs_input_grad[1]
        dzs, grad_weight = [], None
        for k, (lse, ent) in enumerate(zip(ctx.lses, ctx.ents)):
            sl = slice(k * CHUNK, k * CHUNK + lse.shape[0])
            h = hidden[sl].to(dtype)
            raw = logits[k] if ctx.keep else h @ w.t()
            z = raw.to(torch.float32, copy=True).div_(T)
            logp = z.sub_(lse[:, None])  # log p, in place of z
            g = grad_lp[sl].float()
            scale = g[:, None]
            if ctx.entropy_grad:  # g_lp + g_H (log p + H)
                scale = (logp + ent[:, None]).mul_(grad_entropy[sl, None].float()).add_(scale)
            dz = logp.exp_().mul_(scale).neg_()  # -p (g_lp + g_H (log p + H))
            dz.scatter_add_(1, targets[sl, None], g[:, None])
            dz = dz.div_(T).to(dtype)
            if grad_hidden is not None:
                grad_hidden[sl] = dz @ w
            if want_w and ctx.keep:
                dzs.append(dz)
            elif want_w:  # accumulated chunk by chunk in fp32: no (N, V) tensor
                part = (dz.t() @ h).float()
                grad_weight = part if grad_weight is None else grad_weight.add_(part)
        if want_w and dzs:  # one product over all positions, as nn.Linear's backward
            grad_weight = torch.cat(dzs).t() @ hidden.to(dtype)
        if grad_weight is not None:
            grad_weight = grad_weight.to(ctx.weight_dtype)
        return grad_hidden, grad_weight, None, None, None, None, None


def chunked_token_logprobs(hidden: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor,
                           temperature: float = 1.0, entropy_grad: bool = False,
                           keep_logits: bool | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """(log p(targets), entropy) at N positions: hidden (N, H), the output embedding `weight` (V, H),
    targets (N,). The projection runs in autocast's dtype when autocast is on (as `nn.Linear` would),
    the softmax in fp32. The entropy has a gradient only with `entropy_grad`. `keep_logits`: keep the
    logits for the backward pass (True) or recompute them there (False); None: by `keeps_logits`."""
    device = hidden.device.type
    autocasting = torch.amp.is_autocast_available(device) and torch.is_autocast_enabled(device)
    dtype = torch.get_autocast_dtype(device) if autocasting else weight.dtype
    keep = keeps_logits(hidden.shape[0], weight.shape[0], dtype) if keep_logits is None else keep_logits
    with torch.autocast(device, enabled=False) if autocasting else nullcontext():
        return _TokenLogprobs.apply(hidden, weight, targets, temperature, dtype, entropy_grad, keep)
