"""Logprobs of the trained tokens from the last hidden states, the vocabulary projection in chunks.

At SmolLM2's 49k vocabulary the projection is a fifth of a forward's products, and the softmax around
it moved a (positions x vocabulary) fp32 tensor through six or seven whole-tensor ops forward and
back (a cast, the temperature, log-softmax, the exp and product of the entropy, the scatter of the
gradient): on the calculator recipe's update ~600 positions a micro-batch, 118 MB a tensor, every one
a fresh allocation that the CPU's allocator maps and faults in anew. Here the positions go in chunks
small enough to be served from the heap, and only the bf16 logits (what the projection returns
under autocast) and each position's log-sum-exp are kept for the backward pass, which rebuilds the
softmax from them: the values and the gradient are the plain path's, to fp32 rounding.

The entropy is returned detached (a metric). An entropy bonus or a full distribution (on-policy
distillation) takes the plain path in `forward.py`.
"""

from __future__ import annotations

import torch

CHUNK = 128  # positions a chunk: 128 x 49,152 fp32 is 25 MB, under glibc's largest mmap threshold (32 MB)


class _TokenLogprobs(torch.autograd.Function):
    @staticmethod
    def forward(ctx, hidden, weight, targets, temperature: float, dtype: torch.dtype):
        w = weight.to(dtype)
        logits, lses, lps, ents = [], [], [], []
        for start in range(0, hidden.shape[0], CHUNK):
            raw = hidden[start : start + CHUNK].to(dtype) @ w.t()  # (C, V) in the compute dtype
            z = raw.to(torch.float32, copy=True).div_(temperature)
            lse = torch.logsumexp(z, dim=-1)
            t = targets[start : start + CHUNK]
            lps.append(z.gather(1, t[:, None])[:, 0] - lse)
            p = (z - lse[:, None]).exp_()
            ents.append(lse - torch.linalg.vecdot(p, z))
            logits.append(raw)
            lses.append(lse)
        ctx.save_for_backward(hidden, w, targets, *logits)  # w: the cast, kept rather than made again
        ctx.lses, ctx.temperature, ctx.dtype, ctx.weight_dtype = lses, temperature, dtype, weight.dtype
        entropy = torch.cat(ents) if ents else hidden.new_zeros(0, dtype=torch.float32)
        ctx.mark_non_differentiable(entropy)
        return (torch.cat(lps) if lps else hidden.new_zeros(0, dtype=torch.float32)), entropy

    @staticmethod
    def backward(ctx, grad_lp, _grad_entropy):
        hidden, w, targets, *logits = ctx.saved_tensors
        T, dtype = ctx.temperature, ctx.dtype
        grad_hidden = hidden.new_empty(hidden.shape) if ctx.needs_input_grad[0] else None
        dzs = []
        for k, (raw, lse) in enumerate(zip(logits, ctx.lses)):
            sl = slice(k * CHUNK, k * CHUNK + raw.shape[0])
            g = grad_lp[sl].float()
            # d lp / d z = onehot(target) - softmax(z), and z = raw / T
            dz = (raw.to(torch.float32, copy=True).div_(T) - lse[:, None]).exp_().mul_(-g[:, None])
            dz.scatter_add_(1, targets[sl, None], g[:, None])
            dz = dz.div_(T).to(dtype)
            if grad_hidden is not None:
                grad_hidden[sl] = dz @ w
            dzs.append(dz)
        grad_weight = None
        if ctx.needs_input_grad[1] and dzs:  # one product over all positions, as nn.Linear's backward
            grad_weight = (torch.cat(dzs).t() @ hidden.to(dtype)).to(ctx.weight_dtype)
        return grad_hidden, grad_weight, None, None, None


def chunked_token_logprobs(hidden: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor,
                           temperature: float = 1.0) -> tuple[torch.Tensor, torch.Tensor]:
    """(log p(targets), entropy) at N positions: hidden (N, H), the output embedding `weight` (V, H),
    targets (N,). The projection runs in autocast's dtype when autocast is on (as `nn.Linear` would),
    the softmax in fp32."""
    device = hidden.device.type
    if not (torch.amp.is_autocast_available(device) and torch.is_autocast_enabled(device)):
        return _TokenLogprobs.apply(hidden, weight, targets, temperature, weight.dtype)
    with torch.autocast(device, enabled=False):
        return _TokenLogprobs.apply(hidden, weight, targets, temperature, torch.get_autocast_dtype(device))
