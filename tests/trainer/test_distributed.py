"""Data-parallel training (`trainer/distributed.py`) on 2 real processes with the gloo backend: one
update split across the ranks equals the single-process update of the same batch.

SGD with no clipping, so a weight's change is the gradient times -LR (an Adam step would turn
reduction-order noise into whole steps; LR lifts the policy gradient of a random tiny model, ~1e-6,
well above the weights' float resolution); fp32. The groups have very different lengths, so the ranks
hold unequal token counts: a per-rank normalizer (the mean of per-rank token means) gives another
gradient, and the test shows that it does, so the comparison can fail.

A step's rollouts with fewer tasks than ranks (`rl.tasks.per_step` 1, DAPO's refill rounds of one
task): the rank with none rolls out nothing, and every rank gets what one process samples.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from agentic_rl.models import sharding
from agentic_rl.trainer.config import load_config
from agentic_rl.trainer.credit import compute_credit
from agentic_rl.trainer.distributed import DataParallel, World
from agentic_rl.trainer.loss_terms import build_loss
from agentic_rl.trainer.sft import sft_step
from agentic_rl.trainer.update import UpdateBatch, rl_update
from agentic_rl.types import RolloutBatch, Task, Trajectory, TrajectoryGroup, Turn

PAD = 0
LR = 1e3


def _trajectory(task: int, n_action: int, reward: float, gen: torch.Generator) -> Trajectory:
    prompt = (*range(10, 22), 300 + task)  # a shared system prompt, then the task's own token
    action = tuple(int(x) for x in torch.randint(100, 5000, (n_action,), generator=gen))
    obs = tuple(int(x) for x in torch.randint(100, 5000, (3,), generator=gen))
    final = tuple(int(x) for x in torch.randint(100, 5000, (2,), generator=gen))
    turns = (Turn(prompt, action, (-1.0,) * n_action, "a", "stop"), Turn(obs, final, (-1.0,) * 2, "b", "eos"))
    return Trajectory(Task(str(task), "p"), turns, reward=reward)


def _groups(lengths=(3, 40, 5), rewards=((1.0, 0.0), (0.0, 1.0), (1.0, 0.3))) -> list[TrajectoryGroup]:
    """Group i's actions are `lengths[i]` tokens long: with 2 ranks sharing groups 0, 2 | 1 the ranks
    train 24 and 84 tokens."""
    gen = torch.Generator().manual_seed(3)
    return [TrajectoryGroup(Task(str(i), "p"), tuple(_trajectory(i, n, r, gen) for r in rs))
            for i, (n, rs) in enumerate(zip(lengths, rewards))]


def _after(model) -> dict[str, torch.Tensor]:
    return {n: p.detach() for n, p in sharding.full_parameters(model).items()}  # whole, when sharded


def _rl_delta(tokenizer, world: World, minibatches: int, groups=None, corrections=False, strategy="ddp"):
    """The weights' change after one rl_update (SGD at LR) and its metrics, on `world`."""
    from agentic_rl.models.loader import tiny_model

    cfg = load_config("recipes/tiny.yaml", [f"rl.optim.lr={LR}", "rl.optim.max_grad_norm=1e9",
                                            f"rl.optim.minibatches={minibatches}", "hindsight.coef=0.5"])
    model = tiny_model(tokenizer, seed=0).eval()
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    groups = groups if groups is not None else _groups()
    fixes = tuple(_trajectory(9 + i, n, 1.0, torch.Generator().manual_seed(i)) for i, n in enumerate((4, 30, 6)))
    batch = UpdateBatch(RolloutBatch(tuple(groups)), compute_credit(groups, cfg.rl.algorithm),
                        fixes if corrections else ())
    parallel = DataParallel(model, world, strategy)  # before the optimizer: FSDP swaps the parameters
    metrics = rl_update(model, torch.optim.SGD(model.parameters(), lr=LR), batch, build_loss(cfg, model),
                        cfg.rl.optim, PAD, parallel=parallel).metrics
    local = sum((p.to_local() if hasattr(p, "to_local") else p).numel() for p in model.parameters())
    return {n: p - before[n] for n, p in _after(model).items()}, {**metrics, "local_numel": local}


def _sft_delta(tokenizer, world: World, strategy="ddp"):
    from agentic_rl.models.loader import tiny_model

    model = tiny_model(tokenizer, seed=0).eval()
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    rows = [t for g in _groups() for t in g.trajectories]
    micro = [rows[0:2], rows[2:4], rows[4:6]]  # 24, 84 and 28 action tokens
    parallel = DataParallel(model, world, strategy)
    metrics = sft_step(model, torch.optim.SGD(model.parameters(), lr=1.0), micro, PAD, "fp32", parallel)
    return {n: p - before[n] for n, p in _after(model).items()}, metrics


def _collected(tokenizer) -> dict:
    """One step's `collect` on the tiny recipe with one task a step and DAPO's refill rounds (a random
    policy's groups have no reward spread, so both rounds run, each of one task), a generator per
    episode: what every rank ends with."""
    from agentic_rl.engines.hf import HFEngine
    from agentic_rl.envs.registry import get_env
    from agentic_rl.models.loader import tiny_model
    from agentic_rl.monitor.logger import MetricsLogger
    from agentic_rl.trainer.producer import collect
    from agentic_rl.trainer.rl_loop import _setup

    model = tiny_model(tokenizer, seed=0)
    with tempfile.TemporaryDirectory() as tmp:
        cfg = load_config("recipes/tiny.yaml", ["rl.tasks.per_step=1", "rollout.rng=episode", f"output_dir={tmp}",
                                                "rl.filters.dynamic_sampling=true", "rl.filters.max_refill_rounds=2"])
        run, _, _ = _setup(model, tokenizer, HFEngine(model, tokenizer, "fp32"), get_env(cfg.env.name), cfg,
                           MetricsLogger(cfg.run_dir, tensorboard=False))
        kept, sampled, stats = collect(run, seed=11)
    rows = lambda groups: [[(g.task.id, t.token_ids(), t.reward) for t in g.trajectories] for g in groups]  # noqa: E731
    return {"kept": rows(kept), "sampled": rows(sampled), "episodes": stats.episodes}


def _worker(rank: int, size: int, init: str, out: str) -> None:
    from agentic_rl.models.loader import load_tokenizer

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{init}", rank=rank, world_size=size)
    try:
        tokenizer, w = load_tokenizer("tiny"), World(rank, size)
        out_ = {}
        for s in ("ddp", "fsdp"):
            out_.update({f"rl_one_{s}": _rl_delta(tokenizer, w, 1, strategy=s),
                         f"rl_two_{s}": _rl_delta(tokenizer, w, 2, corrections=True, strategy=s),
                         f"sft_{s}": _sft_delta(tokenizer, w, s)})
        out_["collect"] = _collected(tokenizer)
        torch.save(out_, Path(out) / f"rank{rank}.pt")
    finally:
        dist.destroy_process_group()


@pytest.fixture(scope="module")
def ranks():
    """What each of 2 gloo processes computed."""
    with tempfile.TemporaryDirectory() as tmp:
        mp.spawn(_worker, args=(2, f"{tmp}/init", tmp), nprocs=2, join=True)
        yield [torch.load(Path(tmp) / f"rank{r}.pt", weights_only=False) for r in range(2)]


def test_a_rank_with_no_tasks_samples_nothing_and_gets_every_group(tokenizer, ranks):
    """One task a step on two ranks, and two refill rounds of one task each: rank 1 has no task in any
    round. Both ranks end with the groups one process samples, token for token (a generator per
    episode, so where an episode runs does not change it)."""
    want = _collected(tokenizer)
    assert len(want["sampled"]) == 3 and want["episodes"] == 3 * 4  # the refill rounds ran
    assert ranks[0]["collect"] == ranks[1]["collect"] == want


@pytest.mark.parametrize("n,size", [(0, 2), (1, 2), (5, 2), (7, 3), (8, 4)])
def test_shares_of_every_rank_put_back_together_are_the_items_in_order(n, size):
    """The invariant the gathered rollouts and evaluations rely on: each item in exactly one rank's
    share, and `unshare` restores the order, whatever the remainder."""
    items = list(range(n))
    shares = [World(r, size).share(items) for r in range(size)]
    assert sorted(i for s in shares for i in s) == items
    assert World(0, size).unshare(shares) == items


def _assert_same_update(got: dict, want: dict) -> float:
    """Equal within fp32 reduction-order noise: 1e-4 of the largest change. Returns that tolerance."""
    scale = max(float(d.abs().max()) for d in want.values())
    assert scale > 1e-3  # the update moved the weights
    for name, d in want.items():
        torch.testing.assert_close(got[name], d, rtol=1e-3, atol=1e-4 * scale, msg=name)
    print("max gap / scale", max(float((got[n] - want[n]).abs().max()) for n in want) / scale)
    return 1e-4 * scale


@pytest.mark.parametrize("strategy", ["ddp", "fsdp"])
@pytest.mark.parametrize("case,minibatches,corrections", [("rl_one", 1, False), ("rl_two", 2, True)])
def test_a_data_parallel_rl_update_equals_the_single_process_update(tokenizer, ranks, case, minibatches, corrections,
                                                                    strategy):
    """Two ranks, three groups of unequal lengths. With two minibatches (and hindsight corrections of
    unequal lengths) the second minibatch holds one group, so rank 1 has no rows there and joins the
    reduction with the zero pass; the proximal logprobs are forwarded before the first optimizer step,
    two groups on rank 0 and one on rank 1 (under FSDP, where every forward is a collective, rank 1
    runs a zero pass to match). The ranks end with identical weights, equal to one process's — with a
    whole copy on each rank (DDP) or the policy sharded over both (FSDP2)."""
    want, want_metrics = _rl_delta(tokenizer, World(), minibatches, corrections=corrections)
    (d0, m0), (d1, m1) = ranks[0][f"{case}_{strategy}"], ranks[1][f"{case}_{strategy}"]
    for name in want:
        assert torch.equal(d0[name], d1[name]), name
    _assert_same_update(d0, want)
    whole = sum(d.numel() for d in want.values())
    assert m0["local_numel"] == (whole if strategy == "ddp" else pytest.approx(whole / 2, rel=0.01))  # sharded
    for key in ("trained_tokens", "optimizer_steps", "entropy", *(("hindsight_nll",) if corrections else ())):
        assert m0[key] == pytest.approx(want_metrics[key], rel=1e-5), key
        assert m1[key] == m0[key], key


def test_a_per_rank_normalizer_would_give_another_update(tokenizer):
    """The witness that the comparison above can fail: each rank's groups normalized by its own tokens
    and the two gradients averaged (what DDP's mean over per-rank token means gives) is far from the
    update of the whole batch, because the ranks hold 24 and 84 tokens."""
    groups = _groups()
    whole, _ = _rl_delta(tokenizer, World(), 1, groups)
    per_rank = [_rl_delta(tokenizer, World(), 1, share)[0] for share in (groups[0::2], groups[1::2])]
    naive = {n: (per_rank[0][n] + per_rank[1][n]) / 2 for n in whole}
    scale = max(float(d.abs().max()) for d in whole.values())
    assert max(float((naive[n] - whole[n]).abs().max()) for n in whole) > 100 * 1e-4 * scale


@pytest.mark.parametrize("strategy", ["ddp", "fsdp"])
def test_a_data_parallel_sft_step_equals_the_single_process_step(tokenizer, ranks, strategy):
    """Three micro-batches of 24, 84 and 28 trained tokens over two ranks (two and one): the token mean
    over the whole step."""
    want, want_metrics = _sft_delta(tokenizer, World())
    (d0, m0), (d1, _) = ranks[0][f"sft_{strategy}"], ranks[1][f"sft_{strategy}"]
    for name in want:
        assert torch.equal(d0[name], d1[name]), name
    _assert_same_update(d0, want)
    assert m0["loss"] == pytest.approx(want_metrics["loss"], rel=1e-5)
    assert m0["trained_tokens"] == want_metrics["trained_tokens"]
