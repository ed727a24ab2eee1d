"""Data-parallel training with torch.distributed: `torchrun --nproc-per-node N --no-python agentic-rl train`.

Every rank holds the whole step. Each rolls out its share of the step's tasks on its own engine and
the scored groups are gathered, so every rank filters, assigns credit and draws the next tasks from
the same groups in the same order (whole groups, so a group's advantages are computed where the
whole group is). Each optimizer step's normalizer counts every rank's tokens, each rank
back-propagates its share of the minibatch's groups, and DDP sums the gradients: the step equals the
single-process step on the whole minibatch. Rank 0 logs and writes checkpoints.

The training forward goes through the DDP wrapper (`PolicyModule`), so its hooks see every use of a
parameter; an optimizer step's backward passes but the last run under `no_sync`, and a rank with no
rows in a minibatch joins the reduction with a pass that touches every parameter at zero loss.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any, TypeVar

import torch
import torch.distributed as dist

from agentic_rl.models import sharding
from agentic_rl.models.device import device_of
from agentic_rl.models.forward import PolicyOutputs, policy_forward
from agentic_rl.rollout.loop import RolloutStats
from agentic_rl.types import Batch

T = TypeVar("T")


@dataclass(frozen=True)
class World:
    """This process's place among the ranks (one process: rank 0 of 1)."""

    rank: int = 0
    size: int = 1

    @property
    def main(self) -> bool:
        return self.rank == 0

    def share(self, items: Sequence[T]) -> list[T]:
        """This rank's items: every `size`-th from its rank on."""
        return list(items[self.rank :: self.size])

    def unshare(self, shares: Sequence[Sequence[T]]) -> list[T]:
        """The items back in their order, from every rank's share (`gather(share(items))`)."""
        out: list = [None] * sum(len(s) for s in shares)
        for r, items in enumerate(shares):
            out[r :: self.size] = items
        return out

    def gather(self, obj: Any, group=None) -> list[Any]:
        """Every rank's `obj`, in rank order (pickled: for Python objects, not tensors)."""
        if self.size == 1:
            return [obj]
        out: list[Any] = [None] * self.size
        dist.all_gather_object(out, obj, group=group)
        return out

    def barrier(self) -> None:
        if self.size > 1:
            dist.barrier()


def world() -> World:
    """This process's `World`, from torch.distributed's state (one process when it has none)."""
    if not (dist.is_available() and dist.is_initialized()):
        return World()
    return World(dist.get_rank(), dist.get_world_size())


_SIDE: list = []  # the second process group, once joined


def init_world(device: str = "auto") -> World:
    """Join the process group torchrun describes (WORLD_SIZE > 1): NCCL on CUDA, gloo otherwise; and
    a second gloo group for the rollout producer's gathers, which may run on their own thread while
    the trainer's gradients are reduced (one group's collectives must not interleave)."""
    if int(os.environ.get("WORLD_SIZE", "1")) > 1 and not dist.is_initialized():
        cuda = torch.cuda.is_available() and (device == "auto" or device.startswith("cuda"))
        if cuda:
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
        dist.init_process_group("nccl" if cuda else "gloo")
        _SIDE[:] = [dist.new_group(backend="gloo")]
    return world()


def gather_rollouts(groups: list[T], stats: RolloutStats) -> tuple[list[T], RolloutStats]:
    """Every rank's rolled-out groups (each rank ran `world().share(tasks)`), in the tasks' order."""
    w = world()
    if w.size == 1:
        return groups, stats
    parts = w.gather((groups, stats), group=_SIDE[0] if _SIDE else None)
    stats = [s for _, s in parts]
    return w.unshare([g for g, _ in parts]), RolloutStats.total(stats, max(s.seconds for s in stats))


class PolicyModule(torch.nn.Module):
    """The policy's training forward as one module call (`models/forward.policy_forward`), so a
    wrapper (DDP; FSDP2's gathering) sees every use of every parameter. `forward(None)` is the zero
    pass: a zero that depends on every trainable parameter."""

    def __init__(self, model: torch.nn.Module):
        super().__init__()
        self.model = model

    def forward(self, batch, **kw) -> PolicyOutputs | torch.Tensor:
        if batch is None:
            return sum((p.reshape(-1)[:1] * 0).sum() for p in self.model.parameters() if p.requires_grad)
        return policy_forward(self.model, batch, **kw)


class DataParallel:
    """The policy's training forward on this rank, and how its gradients meet the other ranks'.
    With one process it is the model itself (no wrapper, no communication).

    `strategy` (`model.parallel`): "ddp" keeps a whole copy on every rank and all-reduces the
    gradients; "fsdp" shards parameters, gradients and optimizer state over the ranks
    (`models/sharding.py`, FSDP2), so every forward is a collective: the ranks run the same number of
    them, a rank short of rows running zero passes."""

    def __init__(self, model: torch.nn.Module, w: World | None = None, strategy: str = "ddp"):
        self.model = model
        self.world = w or world()
        self._module = PolicyModule(model)
        self._ddp = None
        self.sharded = self.world.size > 1 and strategy == "fsdp"
        if self.sharded:
            sharding.shard(model)
        elif self.world.size > 1:
            from torch.nn.parallel import DistributedDataParallel as DDP

            # buffers (rotary frequencies) never change; broadcasting them would make every forward a
            # collective, and the ranks run different numbers of forwards
            self._ddp = DDP(self._module, forward_sync_buffers=False)
            self._ddp.register_comm_hook(None, _sum_hook)

    def forward(self, batch, **kw) -> PolicyOutputs:
        """The policy forward of `batch` (keywords of `policy_forward`), through DDP when distributed
        and differentiating, through the FSDP root when sharded."""
        if self.sharded:
            return sharding.call(self.model, _unfactored_forward, batch, **kw)
        if self._ddp is not None and torch.is_grad_enabled():
            return self._ddp(batch, **kw)
        return policy_forward(self.model, batch, **kw)

    def each(self, calls: Sequence[Callable[[], T]]) -> list[T]:
        """Each call (forwards of this rank's share); when sharded, zero passes until every rank has
        run as many forwards as the busiest."""
        most = self._most(len(calls))  # first: a forward's gathering must meet the other ranks' forwards
        out = [c() for c in calls]
        for _ in range(most - len(calls)):
            self._zero_pass()
        return out

    def backward(self, passes: Sequence[Callable[[], tuple[torch.Tensor, T]]], extra=()) -> list[T]:
        """Each pass (a forward: (loss, stats)) and its backward; then the gradients are the sums over
        every rank's passes (`extra`: parameters outside the policy, e.g. a critic's head, summed
        explicitly). Returns the passes' stats."""
        if self.sharded:
            return self._sharded_backward(passes)
        out = []
        for i, run in enumerate(passes):
            last = i == len(passes) - 1
            with self._ddp.no_sync() if self._ddp is not None and not last else nullcontext():
                value, stats = run()
                value.backward()
            out.append(stats)
        if self._ddp is not None:
            if not passes:  # this rank has no rows: it still joins the reduction
                self._ddp(None).backward()
            for p in extra:
                if p.grad is None:
                    p.grad = torch.zeros_like(p)
                dist.all_reduce(p.grad)
        return out

    def _sharded_backward(self, passes) -> list:
        """FSDP: as many backward passes on every rank (zero passes where a rank has fewer), the
        gradients reduce-scattered after the last."""
        root, n, out = sharding.root(self.model), self._most(len(passes)), []
        for i in range(n):
            root.set_requires_gradient_sync(i == n - 1)
            if i < len(passes):
                value, stats = passes[i]()
                out.append(stats)
            else:
                value = self._zero_pass()
            value.backward()
        return out

    def _most(self, n: int) -> int:
        """The largest `n` over the ranks (this rank's own when not sharded)."""
        if not self.sharded:
            return n
        t = torch.tensor([n], device=device_of(self.model))  # the trainer's group, as FSDP's
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return int(t)

    def _zero_pass(self) -> torch.Tensor:
        """A forward through every layer that contributes zero (a gradient of zeros)."""
        return sharding.call(self.model, _zero_forward)

    @property
    def shares_prompt_forward(self) -> bool:
        """The step's system prompt may be forwarded once for all micro-batches (`SharedPrompt`): not
        under DDP, whose reduction fires on the last backward, before the prompt's own, nor FSDP."""
        return self._ddp is None and not self.sharded


def _unfactored_forward(model, batch: Batch, **kw) -> PolicyOutputs:
    """`policy_forward` of `batch` with its shared prefix forwarded in every row, so the forward calls
    each layer once whatever the rows (the prefix path calls them twice; under FSDP each call gathers
    the layer's parameters, and every rank must gather as often as the others)."""
    p = len(batch.prefix_ids)
    if not p:
        return policy_forward(model, batch, **kw)
    B, dev = len(batch), batch.input_ids.device

    def before(x, fill):
        return torch.cat([torch.full((B, p), fill, dtype=x.dtype, device=dev), x], dim=1)

    ids = torch.cat([torch.tensor(batch.prefix_ids, device=dev).expand(B, p), batch.input_ids], dim=1)
    whole = Batch((), ids, before(batch.attention_mask, 1), before(batch.loss_mask, 0),
                  before(batch.advantages, 0), before(batch.sampler_logprobs, 0))
    out = policy_forward(model, whole, **kw)
    cut = lambda x: None if x is None else x[:, p:].clone()  # noqa: E731  (FSDP: no views out of its root)
    return PolicyOutputs(cut(out.logprobs), cut(out.entropy), cut(out.values), out.full)


def _zero_forward(model) -> torch.Tensor:
    ids = torch.zeros((1, 1), dtype=torch.long, device=device_of(model))
    return model(input_ids=ids).logits.float().sum() * 0


def _sum_hook(state, bucket):
    """DDP's reduction as a sum (its default averages): each rank's loss is already divided by the
    global normalizer."""
    return dist.all_reduce(bucket.buffer(), async_op=True).get_future().then(lambda fut: fut.value()[0])
