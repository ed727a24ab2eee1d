"""Rollout workers on a real local Ray cluster (2 CPUs, a capped object store; not local mode).

In fp32 with a generator per episode (`rollout.rng: episode`), an episode samples the same tokens on
whichever worker it lands: the workers' groups equal the in-process rollout's, and a whole training
run with 2 workers equals the in-process run. With one generator per batch they do not (the witness
that the comparison can fail). A worker killed mid-step costs its own episodes, marked as the
machine's failures, and the next step has every worker back.
"""

from __future__ import annotations

import json
import os

import pytest
import ray

from agentic_rl.engines.hf import HFEngine
from agentic_rl.envs.registry import get_env
from agentic_rl.models.loader import load_tokenizer, tiny_model
from agentic_rl.rollout.loop import episode_seeds, rollout
from agentic_rl.trainer import rl_loop
from agentic_rl.trainer.config import load_config
from agentic_rl.trainer.episodes import episodes
from agentic_rl.trainer.loop import train
from agentic_rl.trainer.workers import RolloutWorkers

SEED, TASKS = 123, 4


@pytest.fixture(scope="module")
def cluster():
    ray.init(num_cpus=2, object_store_memory=128 * 1024**2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def setup(cluster):
    # half a CPU each: the training run below starts its own two workers beside these
    cfg = load_config("recipes/tiny.yaml", ["rollout.rng=episode", "rollout.workers=2", "rollout.worker_cpus=0.5"])
    tokenizer = load_tokenizer("tiny")
    model = tiny_model(tokenizer, seed=5)  # not the workers' own start (seed 0): the sync must reach them
    spec = get_env(cfg.env.name)
    tasks = spec.tasks("train", TASKS, 0)
    seeds = episode_seeds(SEED, range(TASKS), cfg.rl.tasks.group_size)
    ep = episodes(spec, cfg.env.options, cfg.rollout)
    local, _ = rollout(HFEngine(model, tokenizer, "fp32"), tokenizer, ep.make_env, tasks, cfg.rl.tasks.group_size,
                       ep.params, ep.budget, seed=SEED, episode_seeds=seeds)
    pool = RolloutWorkers(cfg)
    pool.sync(model, 1)
    yield cfg, model, tasks, seeds, local, pool
    pool.close()


def _rows(groups):
    return [[(t.token_ids(), t.infra_failure) for t in g.trajectories] for g in groups]


def test_workers_sample_what_the_process_samples_with_a_generator_per_episode(setup):
    _, _, tasks, seeds, local, pool = setup
    remote, stats = pool.rollout(tasks, SEED, seeds)
    assert _rows(remote) == _rows(local)
    for g, h in zip(remote, local):
        for t, u in zip(g.trajectories, h.trajectories):
            assert t.sampled_logprobs() == pytest.approx(u.sampled_logprobs(), abs=1e-5)
    assert stats.episodes == TASKS * len(local[0].trajectories)
    batch, _ = pool.rollout(tasks, SEED)  # the witness: one generator per worker batch samples otherwise
    assert _rows(batch) != _rows(local)


def test_a_worker_killed_mid_step_costs_only_its_episodes(setup):
    """Worker 1 is SIGKILLed as it starts its episodes (a failpoint armed in its process only): its
    tasks (1 and 3) come back as `worker` failures, worker 0's as sampled; Ray restarts worker 1, which
    loads the current weights with its next episodes and samples as before."""
    _, model, tasks, seeds, local, pool = setup
    arm = lambda self: os.environ.__setitem__("AGENTIC_RL_FAILPOINT", "worker1.rollout")  # noqa: E731
    ray.get(pool.actors[1].__ray_call__.remote(arm))
    hit, _ = pool.rollout(tasks, SEED, seeds)
    assert [all(t.infra_failure == "worker" for t in g.trajectories) for g in hit] == [False, True, False, True]
    assert _rows([hit[0], hit[2]]) == _rows([local[0], local[2]])
    again, _ = pool.rollout(tasks, SEED, seeds)
    assert _rows(again) == _rows(local)


RUN = ["rollout.rng=episode", "rl.steps=2", "rollout.worker_cpus=0.5", "sft.examples=0", "eval.tasks_per_split=2",
       "eval.baselines=false", "rl.algorithm.entropy_coef=0.01"]


def _train(out, *overrides) -> tuple[list[dict], list[dict]]:
    """The tiny recipe (fp32, one thread) trained with `RUN` and `overrides`: its metric rows and its
    trajectories."""
    train(load_config("recipes/tiny.yaml", [*RUN, *overrides, f"output_dir={out}"]))
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    trajectories = [{k: r[k] for k in ("step", "token_ids", "loss_mask", "reward", "advantages")}
                    for r in map(json.loads, (out / "trajectories" / "rl.jsonl").read_text().splitlines())]
    return rows, trajectories


@pytest.fixture(scope="module")
def in_process(cluster, tmp_path_factory):
    return _train(tmp_path_factory.mktemp("w0"), "rollout.workers=0")


def _arm(pool: RolloutWorkers, i: int, spec: str) -> None:
    """Arm the failpoint `spec` in worker i's process only: the process Ray restarts in its place is not."""
    ray.get(pool.actors[i].__ray_call__.remote(lambda self: os.environ.__setitem__("AGENTIC_RL_FAILPOINT", spec)))


def _armed_runs(monkeypatch, spec: str) -> None:
    """Training runs whose pool arms `spec` in worker 1 once the pool has started (before its first sync)."""
    class Armed(RolloutWorkers):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            _arm(self, 1, spec)
    monkeypatch.setattr(rl_loop, "RolloutWorkers", Armed)


def _same_figures(got: dict, want: dict) -> None:
    for k, v in want.items():
        if isinstance(v, float) and not k.startswith(("time_", "tokens_per_s", "mem_")):
            assert got[k] == pytest.approx(v, rel=1e-3, abs=1e-6), k


def test_a_run_with_two_workers_trains_as_the_run_in_process(in_process, tmp_path):
    """The tiny recipe (fp32, one thread) with rollout.rng: episode, in process and on 2 Ray workers:
    the same tokens sampled at every step, so the same rewards, advantages and updates. Only the
    sampler's logprobs may differ in the last bits (fp32 sums in batches of another shape, ~1e-7), and
    through the rollout correction's weights the figures computed from them."""
    rows, trajectories = _train(tmp_path, "rollout.workers=2")
    want_rows, want = in_process
    assert len(trajectories) == len(want) > 0
    assert trajectories == want
    assert [(r["stage"], r["step"]) for r in rows] == [(r["stage"], r["step"]) for r in want_rows]
    for a, b in zip(rows, want_rows):
        _same_figures(a, b)


def test_a_worker_killed_mid_rollout_costs_its_episodes_and_the_run_goes_on(in_process, tmp_path, monkeypatch):
    """Worker 1 SIGKILLed as it starts step 1's episodes: its task's whole group (4 episodes) is the
    machine's failure in step 1's row, the step trains on worker 0's group, sampled and credited as
    in process, and the run goes on with worker 1 back (no failures in step 2)."""
    _armed_runs(monkeypatch, "worker1.rollout:1")
    rows, trajectories = _train(tmp_path, "rollout.workers=2")
    want_rows, want = in_process
    rl = {r["step"]: r for r in rows if r.get("stage") == "rl"}
    assert rl[1]["infra_failures/worker"] == 4 and rl[1]["groups_trained"] == 1
    assert "infra_failures/worker" not in rl[2]
    assert [t for t in trajectories if t["step"] == 1] == [t for t in want if t["step"] == 1][:4]
    assert (tmp_path / "eval.json").exists()
