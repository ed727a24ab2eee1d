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

A packed micro-batch (`rl.optim.pack`) is forwarded padding-free: every row's own tokens (after the
prefix) back to back in one row, each row a segment of its own (with its restarts, several) whose
positions continue from the prefix (`PackedRows`). The trained tokens come in the same order in
both layouts (row by row, left to right), so the forward's per-token outputs land in the (B, T)
layout every loss term reads, and per-row quantities (a sequence's mean, GSPO's ratio, DAPO's
truncated rows) are what they are on the padded rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from agentic_rl.models.forward import common_prefix_len
from agentic_rl.types import Batch, Trajectory, TrajectoryGroup


@dataclass(frozen=True)
class PackedRows:
    """A batch's rows as the model forwards them padding-free: one row of every row's own tokens in
    order. `starts` marks each row's first token, which the prefix's last hidden state predicts."""

    input_ids: torch.Tensor  # (1, W), W = the rows' own tokens in all
    loss_mask: torch.Tensor  # (1, W)
    segment_ids: torch.Tensor  # (1, W) context index: a new one at each row and at each of its restarts
    starts: torch.Tensor  # (1, W) bool

    def to(self, device) -> PackedRows:
        return PackedRows(*(x.to(device) for x in (self.input_ids, self.loss_mask, self.segment_ids, self.starts)))


@dataclass(frozen=True)
class Layout:
    """How the update lays out a micro-batch's rows for the forward: padded or packed (`rl.optim.pack`)."""

    pad_id: int
    pack: bool = False

    def batch(self, trajectories: Sequence[Trajectory], advantages: Sequence[torch.Tensor] | None = None) -> Batch:
        return make_batch(trajectories, self.pad_id, advantages, self.pack)


def make_batch(trajectories: Sequence[Trajectory], pad_id: int,
               advantages: Sequence[torch.Tensor] | None = None, pack: bool = False) -> Batch:
    """Rows = the trajectories' exact token sequences. `advantages[i]` is trajectory i's per-token
    advantage aligned with its `token_ids()` (0 off sampled tokens); None leaves them 0 (SFT).
    `pack`: the forward runs on the rows' `PackedRows`."""
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
    packed = _packed_rows(trajectories, p) if pack else None
    batch = Batch(tuple(rows[0][:p]), input_ids, attention_mask, loss_mask, adv, sampler_lp, segment_ids=segments,
                  packed=packed)
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


def _packed_rows(trajectories: Sequence[Trajectory], p: int) -> PackedRows:
    """The trajectories' tokens after the first `p` (the prefix they share), back to back in one row."""
    ids = [i for t in trajectories for i in t.token_ids()[p:]]
    mask = [m for t in trajectories for m in t.loss_mask()[p:]]
    starts = torch.zeros(1, len(ids), dtype=torch.bool)
    at = 0
    for t in trajectories:
        starts[0, at] = True
        at += len(t.token_ids()) - p
    # a shared prefix means no restarts (`make_batch`): one segment a trajectory
    segments = _segments([list(trajectories)], len(ids)) if p == 0 else torch.cumsum(starts, 1) - 1
    return PackedRows(torch.tensor([ids], dtype=torch.long), torch.tensor([mask], dtype=torch.float), segments, starts)


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
