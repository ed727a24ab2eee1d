"""Training rows from trajectories: a micro-batch's (B, T) tensors, SFT packing, and the mapping
between a trajectory's own token positions and its row in a batch.

Batches are built on the host and moved to the model's device by the caller (`Batch.to`); what
belongs to one trajectory (its advantages, its proximal logprobs, its values) lives on the host.

A GRPO micro-batch's rows share their prompt: `make_batch` cuts the longest common never-trained
prefix (`models/forward.py`'s `common_prefix_len`) into `Batch.prefix_ids`, which the forward pass
runs once; the rest of each row is right-padded. A trajectory whose context started over
(`Turn.restart`) is one row of several segments, attention kept within each, as in SFT packing; the
forward pass reads `Batch.segment_ids` and attends segment by segment, with no (T, T) mask
(`models/attention.py`).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from agentic_rl.models.forward import common_prefix_len
from agentic_rl.types import Batch, Trajectory, TrajectoryGroup


def make_batch(trajectories: Sequence[Trajectory], pad_id: int,
               advantages: Sequence[torch.Tensor] | None = None) -> Batch:
    """Rows = the trajectories' exact token sequences. `advantages[i]` is trajectory i's per-token
    advantage aligned with its `token_ids()` (0 off sampled tokens); None leaves them 0 (SFT)."""
    rows = [t.token_ids() for t in trajectories]
    masks = [t.loss_mask() for t in trajectories]
    lps = [t.sampled_logprobs() for t in trajectories]
    restarted = any(t.restarts for t in trajectories)  # rows of several contexts: segments, no shared prefix
    p = 0 if restarted else common_prefix_len(rows, masks)
    width = max(len(r) for r in rows) - p
    B = len(rows)
    input_ids = torch.full((B, width), pad_id, dtype=torch.long)
    attention_mask = torch.zeros(B, width, dtype=torch.long)
    loss_mask = torch.zeros(B, width)
    adv = torch.zeros(B, width)
    sampler_lp = torch.zeros(B, width)
    for i, (row, mask, lp) in enumerate(zip(rows, masks, lps)):
        n = len(row) - p
        input_ids[i, :n] = torch.tensor(row[p:])
        attention_mask[i, :n] = 1
        loss_mask[i, :n] = torch.tensor(mask[p:], dtype=torch.float)
        sampler_lp[i, :n] = torch.tensor(lp[p:]) * loss_mask[i, :n]
    segments = _segments([[t] for t in trajectories], width) if restarted else None
    batch = Batch(tuple(rows[0][:p]), input_ids, attention_mask, loss_mask, adv, sampler_lp, segment_ids=segments)
    if advantages is not None:
        adv.copy_(batch_layout(advantages, batch) * loss_mask)
    return batch


def make_packed_batch(rows: Sequence[Sequence[Trajectory]], pad_id: int) -> Batch:
    """Each row holds several whole trajectories back to back (SFT packing). Attention stays inside
    each trajectory and positions restart at its start, so each is computed as if it were alone."""
    seqs = [[(t.token_ids(), t.loss_mask()) for t in row] for row in rows]
    width = max(sum(len(ids) for ids, _ in row) for row in seqs)
    B = len(rows)
    input_ids = torch.full((B, width), pad_id, dtype=torch.long)
    loss_mask = torch.zeros(B, width)
    for i, row in enumerate(seqs):
        at = 0
        for ids, mask in row:
            input_ids[i, at : at + len(ids)] = torch.tensor(ids)
            loss_mask[i, at : at + len(ids)] = torch.tensor(mask, dtype=torch.float)
            at += len(ids)
    segments = _segments(rows, width)
    attention = (segments >= 0).long()
    zeros = torch.zeros(B, width)
    return Batch((), input_ids, attention, loss_mask, zeros, zeros.clone(), segment_ids=segments)


def _segments(rows: Sequence[Sequence[Trajectory]], width: int) -> torch.Tensor:
    """(B, width) context index of every token: each trajectory of a row its own segments, a new one
    at each of its restarts (`Trajectory.segment_ids`); -1 on padding."""
    out = torch.full((len(rows), width), -1, dtype=torch.long)
    for i, row in enumerate(rows):
        ids: list[int] = []
        for t in row:
            base = ids[-1] + 1 if ids else 0
            ids += [base + k for k in t.segment_ids()]
        out[i, : len(ids)] = torch.tensor(ids, dtype=torch.long)
    return out


def pack(trajectories: Sequence[Trajectory], max_tokens: int) -> list[list[Trajectory]]:
    """First-fit-decreasing bins of whole trajectories, each bin at most `max_tokens` long (a longer
    trajectory gets a bin of its own)."""
    bins: list[tuple[int, list[Trajectory]]] = []
    for t in sorted(trajectories, key=lambda t: -len(t.token_ids())):
        n = len(t.token_ids())
        for j, (used, members) in enumerate(bins):
            if used + n <= max_tokens:
                bins[j] = (used + n, [*members, t])
                break
        else:
            bins.append((n, [t]))
    return [members for _, members in bins]


def batch_layout(rows: Sequence[torch.Tensor], batch: Batch) -> torch.Tensor:
    """Per-trajectory tensors aligned with `token_ids()` -> the batch's (B, T) layout (prefix cut,
    right-padded with 0)."""
    p = len(batch.prefix_ids)
    out = torch.zeros(batch.input_ids.shape)
    for i, row in enumerate(rows):
        out[i, : len(row) - p] = row[p:].float()
    return out.to(batch.input_ids.device)


def trajectory_rows(x_BT: torch.Tensor, batch, group: TrajectoryGroup) -> list[torch.Tensor]:
    """The inverse of `batch_layout`: a batch-layout tensor back to one row per trajectory, aligned
    with its `token_ids()` (0 on the prefix the batch shares), on the host."""
    p = len(batch.prefix_ids)
    x_BT = x_BT.cpu()
    rows = []
    for i, t in enumerate(group.trajectories):
        row = torch.zeros(len(t.token_ids()))
        row[p:] = x_BT[i, : len(row) - p]
        rows.append(row)
    return rows
