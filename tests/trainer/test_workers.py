"""Rollout workers on a real local Ray cluster (2 CPUs, a capped object store; not local mode).

In fp32 with a generator per episode (`rollout.rng: episode`), an episode samples the same tokens on
whichever worker it lands: the workers' groups equal the in-process rollout's, and a whole training
run with 2 workers equals the in-process run. With one generator per batch they do not (the witness
that the comparison can fail). A worker killed (a failpoint armed in its process only, so not in the
one Ray restarts) costs its own episodes mid-rollout, marked as the machine's failures, and nothing
mid-sync or mid-probe; the pool waits for its restart, within a deadline. A worker whose code raises
stops the step with its traceback. A rollback reaches the workers.
"""

from __future__ import annotations

import json
import os

import pytest
import ray

from agentic_rl.engines.hf import HFEngine
from agentic_rl.engines.probe import SyncProbe
from agentic_rl.envs.registry import get_env
from agentic_rl.models.loader import load_tokenizer, tiny_model
from agentic_rl.monitor.collapse import CollapseMonitor
from agentic_rl.monitor.metrics import MACHINE_PREFIXES
from agentic_rl.rollout.loop import episode_seeds, rollout
from agentic_rl.trainer import rollouts
from agentic_rl.trainer.config import load_config
from agentic_rl.trainer.episodes import episodes
from agentic_rl.trainer.loop import train
from agentic_rl.trainer.workers import RolloutWorkers

SEED, TASKS = 123, 4
G = load_config("recipes/tiny.yaml").rl.tasks.group_size


@pytest.fixture(scope="module")
def cluster():
    ray.init(num_cpus=2, object_store_memory=128 * 1024**2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def setup(cluster):
    # half a CPU each: the training run below starts its own two workers beside these
    cfg = load_config("recipes/tiny.yaml", ["rollout.rng=episode", "rollout.workers.count=2", "rollout.workers.cpus=0.5"])
    tokenizer = load_tokenizer("tiny")
    model = tiny_model(tokenizer, seed=5)  # not the workers' own start (seed 0): the sync must reach them
    spec = get_env(cfg.env.name)
    tasks = spec.tasks("train", TASKS, 0)
    seeds = episode_seeds(SEED, range(TASKS), cfg.rl.tasks.group_size)
    ep = episodes(spec, cfg.env.options, cfg.rollout)
    local, _ = rollout(HFEngine(model, tokenizer, "fp32"), ep.make_env, tasks, cfg.rl.tasks.group_size,
                       ep.params, ep.budget, seed=seeds)
    pool = RolloutWorkers(cfg, ep)
    pool.send(model, 1)
    yield cfg, model, tasks, seeds, local, pool
    pool.close()


def _rows(groups):
    return [[(t.token_ids(), t.infra_failure) for t in g.trajectories] for g in groups]


def test_workers_sample_what_the_process_samples_with_a_generator_per_episode(setup):
    _, _, tasks, seeds, local, pool = setup
    remote, stats = pool.rollout(tasks, G, SEED, seeds)
    assert _rows(remote) == _rows(local)
    for g, h in zip(remote, local):
        for t, u in zip(g.trajectories, h.trajectories):
            assert t.sampled_logprobs() == pytest.approx(u.sampled_logprobs(), abs=1e-5)
    assert stats.episodes == TASKS * len(local[0].trajectories)
    batch, _ = pool.rollout(tasks, G, SEED)  # the witness: one generator per worker batch samples otherwise
    assert _rows(batch) != _rows(local)


def test_fewer_tasks_than_workers_leave_a_worker_idle(setup):
    """One task for two workers (a data-parallel rank's share, a refill round): the task's group is the
    in-process one and nothing fails (worker 1 is not called: a rollout of no tasks would be its
    error); no task, no groups."""
    cfg, _, tasks, seeds, local, pool = setup
    one, stats = pool.rollout(tasks[:1], G, SEED, seeds[:cfg.rl.tasks.group_size])
    assert _rows(one) == _rows(local[:1]) and stats.episodes == cfg.rl.tasks.group_size
    assert pool.rollout([], G, SEED, [])[0] == []


def test_a_worker_whose_code_raises_stops_the_step_with_its_traceback(setup):
    """A bug on worker 1's side (its engine's session raises, as a broken env or format would) is not a
    death: the rollout and the probe raise it, with the worker's traceback, as the bug would in
    process, instead of turning worker 1's episodes into the machine's failures every step."""
    _, model, tasks, seeds, local, pool = setup

    def bug(*args, **kwargs):
        raise ValueError("a bug in the env")
    ray.get(pool.actors[1].__ray_call__.remote(lambda self: setattr(self.engine, "session", bug)))
    try:
        pids = pool.pids()
        with pytest.raises(ValueError, match="a bug in the env") as raised:
            pool.rollout(tasks, G, SEED, seeds)
        assert "RolloutWorker.rollout" in str(raised.value) and ", in bug" in str(raised.value)  # the remote frames
        with pytest.raises(ValueError, match="a bug in the env"):
            pool.sync(model, pool.weights.version, _probe(model))
        assert pool.pids() == pids  # nobody died
    finally:
        ray.get(pool.actors[1].__ray_call__.remote(lambda self: delattr(self.engine, "session")))
    assert _rows(pool.rollout(tasks, G, SEED, seeds)[0]) == _rows(local)


def _probe(model) -> SyncProbe:
    tokenizer = load_tokenizer("tiny")
    return SyncProbe.build(HFEngine(model, tokenizer, "fp32"), tokenizer, "fp32")


@pytest.mark.parametrize("phase", ["load", "probe"])
def test_a_worker_killed_in_a_sync_is_probed_on_the_weights_it_will_sample(setup, phase):
    """Worker 1 SIGKILLed as it loads a new version, or as it decodes the probe: Ray restarts it on its
    own start weights; the pool waits for it, it loads the version before the probe's decode, and the
    probe passes on it. The trainer runs one probe forward per worker, whoever died (under FSDP each is
    a collective, and a rank that ran one fewer would hang the others). The next rollout samples the
    in-process tokens on both workers."""
    _, model, tasks, seeds, local, pool = setup
    probe, forwards = _probe(model), []
    hook = model.register_forward_hook(lambda *_: forwards.append(1))
    pids = pool.pids()
    _arm(pool, 1, f"worker1.{phase}")
    try:
        gap = pool.sync(model, pool.weights.version + 1, probe)
    finally:
        hook.remove()
    assert len(forwards) == 2 and gap <= 1e-3  # the fp32 tolerance: both probed on the synced weights
    now = pool.pids()
    assert now[0] == pids[0] and now[1] != pids[1]  # worker 1 died and is back
    assert _rows(pool.rollout(tasks, G, SEED, seeds)[0]) == _rows(local)


def test_a_worker_killed_mid_step_costs_only_its_episodes(setup):
    """Worker 1 is SIGKILLed as it starts its episodes (a failpoint armed in its process only): its
    tasks (1 and 3) come back as `worker` failures, worker 0's as sampled. Ray restarts worker 1: the
    next rollout waits for it within `restart_timeout_s` (and raises, naming it, past that), and it
    loads the current weights with its next episodes and samples as before."""
    _, model, tasks, seeds, local, pool = setup
    _arm(pool, 1, "worker1.rollout")
    hit, _ = pool.rollout(tasks, G, SEED, seeds)
    assert [all(t.infra_failure == "worker" for t in g.trajectories) for g in hit] == [False, True, False, True]
    assert _rows([hit[0], hit[2]]) == _rows([local[0], local[2]])
    pool.restart_timeout_s = 0.2  # a Ray worker's process takes seconds to start (torch, the model)
    with pytest.raises(RuntimeError, match="rollout worker 1 died and did not come back within 0.2s"):
        pool.rollout(tasks, G, SEED, seeds)
    pool.restart_timeout_s = 300.0
    again, _ = pool.rollout(tasks, G, SEED, seeds)
    assert _rows(again) == _rows(local)


RUN = ["rollout.rng=episode", "rl.steps=2", "rollout.workers.cpus=0.5", "sft.examples=0", "eval.tasks_per_split=2",
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
    """The run in process at rl.max_staleness k (each made once)."""
    runs = {}

    def run(k: int = 0):
        if k not in runs:
            runs[k] = _train(tmp_path_factory.mktemp(f"k{k}"), "rollout.workers.count=0", f"rl.max_staleness={k}")
        return runs[k]
    return run


def _arm(pool: RolloutWorkers, i: int, spec: str) -> None:
    """Arm the failpoint `spec` in worker i's process only: the process Ray restarts in its place is not."""
    ray.get(pool.actors[i].__ray_call__.remote(lambda self: os.environ.__setitem__("AGENTIC_RL_FAILPOINT", spec)))


def _armed_runs(monkeypatch, spec: str) -> None:
    """Training runs whose pool arms `spec` in worker 1 once the pool has started (before its first sync)."""
    class Armed(RolloutWorkers):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            _arm(self, 1, spec)
    monkeypatch.setattr(rollouts, "RolloutWorkers", Armed)


def _same_figures(got: dict, want: dict) -> None:
    for k, v in want.items():
        if isinstance(v, float) and not k.startswith(MACHINE_PREFIXES):
            assert got[k] == pytest.approx(v, rel=1e-3, abs=1e-6), k


def test_a_run_with_two_workers_trains_as_the_run_in_process(in_process, tmp_path):
    """The tiny recipe (fp32, one thread) with rollout.rng: episode, in process and on 2 Ray workers:
    the same tokens sampled at every step, so the same rewards, advantages and updates. Only the
    sampler's logprobs may differ in the last bits (fp32 sums in batches of another shape, ~1e-7), and
    through the rollout correction's weights the figures computed from them."""
    rows, trajectories = _train(tmp_path, "rollout.workers.count=2")
    want_rows, want = in_process()
    assert len(trajectories) == len(want) > 0
    assert trajectories == want
    assert [(r["stage"], r["step"]) for r in rows] == [(r["stage"], r["step"]) for r in want_rows]
    for a, b in zip(rows, want_rows):
        _same_figures(a, b)


# (phase, which of worker 1's entries into it, rl.max_staleness): every phase of a step's life on a
# worker, at every position in the 2-step run — rollout n is step n's batch; load and probe 1 are the
# first sync, before step 1, and n > 1 the sync after step n - 1 — at both stalenesses k = 0 and 1
KILLS = [(phase, n, k) for k in (0, 1) for phase, last in (("rollout", 2), ("load", 3), ("probe", 3))
         for n in range(1, last + 1)]
FAST_KILLS = {("rollout", 1, 0)}  # the pool-alone tests above kill in a sync and a probe in the fast suite


@pytest.mark.parametrize("phase,n,k", [pytest.param(*c, marks=() if c in FAST_KILLS else pytest.mark.slow)
                                       for c in KILLS])
def test_a_worker_killed_at_any_phase_of_a_real_step(in_process, tmp_path, monkeypatch, phase, n, k):
    """Worker 1 SIGKILLed in a training run of 2 workers as it enters `phase` for the n-th time.
    Mid-rollout: its task's whole group (4 episodes) is the machine's failure in that step's row,
    the step trains on worker 0's group, sampled and credited as in process, and the run goes on
    with worker 1 back. Mid-sync or mid-probe: Ray restarts it, it loads the version before its probe
    and its episodes, and the run is the in-process run token for token."""
    _armed_runs(monkeypatch, f"worker1.{phase}:{n}")
    rows, trajectories = _train(tmp_path, "rollout.workers.count=2", f"rl.max_staleness={k}")
    want_rows, want = in_process(k)
    rl = {r["step"]: r for r in rows if r.get("stage") == "rl"}
    assert sorted(rl) == [1, 2] and (tmp_path / "eval.json").exists()
    if phase != "rollout":
        assert trajectories == want and not any("infra_failures/worker" in r for r in rl.values())
        assert all("sync_probe_gap" in r for r in rl.values())
        for a, b in zip(rows, want_rows):
            _same_figures(a, b)
        return
    assert rl[n]["infra_failures/worker"] == 4 and rl[n]["groups_trained"] == 1
    assert [s for s, r in rl.items() if "infra_failures/worker" in r] == [n]
    assert [t for t in trajectories if t["step"] <= n] == [t for t in want if t["step"] < n] + \
        [t for t in want if t["step"] == n][:4]


# (the step whose row warns, so the weights roll back to the step before's, rl.max_staleness, steps):
# every step of a 4-step run with a healthy step before it and a step after it, at k = 0 and 1; the
# fast one cut to the 3 steps it needs
ROLLBACKS = [(step, k, 4) for k in (0, 1) for step in (2, 3)]
FAST_ROLLBACK = (2, 0, 3)


@pytest.mark.parametrize("step,k,steps", [pytest.param(*FAST_ROLLBACK)] + [
    pytest.param(*c, marks=pytest.mark.slow) for c in ROLLBACKS])
def test_a_rollback_reaches_the_workers(cluster, tmp_path, monkeypatch, step, k, steps):
    """A collapse warning at `step` rolls the weights back to the last healthy step's: the workers get
    them with the in-process engine, so the steps after it (at k = 1 the batches produced again) sample
    what the in-process run samples, token for token."""
    monkeypatch.setattr(CollapseMonitor, "update", lambda self, row: (
        {"event": "collapse_warning", "evidence": {}} if row.step == step else None))
    over = [f"rl.steps={steps}", f"rl.max_staleness={k}", "rl.collapse.actions=[rollback]"]
    _, want = _train(tmp_path / "in_process", "rollout.workers.count=0", *over)
    rows, got = _train(tmp_path / "workers", "rollout.workers.count=2", *over)
    assert [r["step"] for r in rows if r.get("action") == "rollback" and r["rolled_back"]] == [step]
    assert sorted({t["step"] for t in got}) == list(range(1, steps + 1))
    assert got == want


@pytest.mark.slow
def test_a_dry_run_starts_the_pool_and_probes_every_worker(cluster):
    """`train --dry-run` with rollout.workers.count: the pool starts, gets the weights and every worker is
    probed on them (the fp32 tolerance)."""
    from agentic_rl.trainer.plan import dry_run

    cfg = load_config("recipes/tiny.yaml", ["rollout.workers.count=2", "rollout.workers.cpus=0.5"])
    [plan] = dry_run(cfg)
    assert plan["rollout_workers"] == 2 and len(set(plan["worker_pids"])) == 2 and plan["worker_probe_gap"] <= 1e-3


@pytest.mark.slow
def test_each_worker_runs_the_agent_against_its_own_proxy_and_its_episodes_train(cluster, tmp_path):
    """`rollout.agent` with 2 Ray workers: every episode of a step ran in a worker's process (never
    the trainer's), against that worker's proxy over its engine (ids `w{i}s...`), both workers
    serving, each step's calls at the version the step samples (step s: s - 1, the syncs reached
    every worker's proxy), and the episodes, scored by the agent's posted reward, trained."""
    import shutil

    from tests.trainer import worker_agent

    shutil.rmtree(worker_agent.OUT, ignore_errors=True)
    rows, trajectories = _train(tmp_path, "rollout.workers.count=2", "rollout.agent.program=tests.trainer.worker_agent:run",
                                "rollout.max_new_tokens=8")
    rl = [r for r in rows if r.get("stage") == "rl"]
    assert [r["step"] for r in rl] == [1, 2]
    assert all(r["trained_tokens"] > 0 and r["infra_failure_frac"] == 0 for r in rl)
    assert len(trajectories) == 2 * 8
    ran = {p.stem: json.loads(p.read_text()) for p in worker_agent.OUT.glob("w*.json")}
    assert len(ran) == 2 * 8 and {eid[:2] for eid in ran} == {"w0", "w1"}
    pids = {r["pid"] for r in ran.values()}
    assert len(pids) == 2 and os.getpid() not in pids
    by_step = sorted({frozenset(r["versions"]) for r in ran.values()}, key=min)
    assert by_step == [{0}, {1}]
