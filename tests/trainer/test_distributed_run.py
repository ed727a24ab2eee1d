"""The real CLI under `torchrun --nproc-per-node 2` (gloo): rank 0 alone logs and writes states; with
`rollout.rng: episode` RL step 1 on 2 processes samples and trains as on 1 (with one generator per
rank's batch it samples otherwise, the witness); a run SIGKILLed mid-checkpoint and resumed under 2
processes ends as the uninterrupted one, and a state resumes only at the world size that wrote it. The same with the policy sharded (model.parallel: fsdp):
its run follows the DDP run, its resume restores the sharded optimizer state bit for bit.

fp32 on one thread a process, per-step rollout seeds and a gloo sum of two values make the
uninterrupted 2-process run reproducible itself; wall-clock fields may differ.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.trainer.test_resume import _assert_same_run, _metrics

ROOT = Path(__file__).resolve().parents[2]
ARGS = ["--set", "rl.steps=3", "--set", "checkpoint.every=1", "--set", "eval.tasks_per_split=4",
        "--set", "rl.algorithm.entropy_coef=0.01", "--set", "sft.examples=8", "--set", "sft.batch_size=4"]


def _train(out: Path, procs: int = 2, resume: bool = False, env: dict | None = None,
           more: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    launch = ([sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={procs}", "-m"]
              if procs > 1 else [sys.executable, "-m"])
    cmd = [*launch, "agentic_rl.cli", "train", "recipes/tiny.yaml", *ARGS, *more, "--set", f"output_dir={out}"]
    return subprocess.run(cmd + (["--resume"] if resume else []), cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=600)


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    out = tmp_path_factory.mktemp("ddp") / "run"
    proc = _train(out)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out


def test_two_processes_log_once(uninterrupted, tmp_path):
    """One metrics.jsonl with the rows of a one-process run, step for step, each RL step's rollout
    counting both ranks' groups (rl.tasks.per_step 2: one task a rank)."""
    single = tmp_path / "single"
    assert _train(single, procs=1).returncode == 0
    rows, want = _metrics(uninterrupted), _metrics(single)
    assert [(r.get("stage"), r.get("step")) for r in rows] == [(r.get("stage"), r.get("step")) for r in want]
    rl = [r for r in rows if r.get("stage") == "rl"]
    assert [r["step"] for r in rl] == [1, 2, 3]
    assert all(r["groups_sampled"] == 2 and r["groups_trained"] == 2 for r in rl)
    assert (uninterrupted / "eval.json").exists() and (uninterrupted / "checkpoints" / "rl").exists()
    # one generator per rank's batch (rollout.rng: batch, the default): the ranks sample other tokens
    # than one process does — the witness that the comparison below can fail
    assert _step_one(uninterrupted)[0] != _step_one(single)[0]


def _step_one(out: Path) -> tuple[list[dict], dict]:
    """RL step 1's trajectories (tokens, loss mask, reward, advantages) and metrics row."""
    rows = [json.loads(line) for line in (out / "trajectories" / "rl.jsonl").read_text().splitlines()]
    keep = ("token_ids", "loss_mask", "reward", "advantages")
    return ([{k: r[k] for k in keep} for r in rows if r["step"] == 1],
            next(r for r in _metrics(out) if r.get("stage") == "rl" and r["step"] == 1))


EPISODE = ("--set", "rollout.rng=episode", "--set", "rl.steps=1", "--set", "eval.tasks_per_split=2",
           "--set", "eval.baselines=false")


def test_two_processes_train_step_one_as_one_process_with_a_generator_per_episode(tmp_path):
    """2 processes against 1, `rollout.rng: episode`: step 1 samples the same tokens (each rank its
    share of the tasks), so the same loss masks, rewards and advantages, and the update's loss is the
    same up to fp32 summation order. (A random policy's rewards, and so GRPO's advantages, are all 0:
    the tokens and the loss, here its entropy term, are what can differ.)"""
    for procs in (2, 1):
        proc = _train(tmp_path / f"p{procs}", procs=procs, more=EPISODE)
        assert proc.returncode == 0, proc.stderr[-3000:]
    (got, got_row), (want, want_row) = _step_one(tmp_path / "p2"), _step_one(tmp_path / "p1")
    assert len(want) == 8
    assert got == want
    # the loss sums 192 per-token fp32 terms, here as two ranks' partial sums: at most ~n·eps = 192 x 6e-8
    # ~ 1e-5 apart (measured 7e-8)
    assert got_row["loss"] == pytest.approx(want_row["loss"], rel=1e-5)


@pytest.mark.slow  # make test keeps the sharded run's kill-and-resume
def test_resume_under_two_processes_after_sigkill_mid_checkpoint(uninterrupted, tmp_path):
    """Rank 0 is SIGKILLed while writing its third state (torchrun then stops rank 1); the same
    command with --resume finishes the run as if nothing had happened."""
    out = tmp_path / "run"
    assert "resuming from" in _killed_and_resumed(out, 3)
    _assert_same_run(uninterrupted, out)


def _killed_and_resumed(out: Path, write: int, more: tuple[str, ...] = ()) -> str:
    """The run SIGKILLed while writing its `write`-th state, then resumed; the resumed run's stderr."""
    killed = _train(out, env={"AGENTIC_RL_FAILPOINT": f"state.mid_write:{write}"}, more=more)
    assert killed.returncode != 0 and "SIGKILL" in killed.stderr, killed.stderr[-2000:]
    resumed = _train(out, resume=True, more=more)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    return resumed.stderr


def test_a_state_resumes_only_at_the_world_size_that_wrote_it(uninterrupted, tmp_path):
    out = tmp_path / "run"
    shutil.copytree(uninterrupted, out)
    proc = _train(out, procs=1, resume=True)
    assert proc.returncode != 0
    assert "written by 2 data-parallel process(es)" in proc.stderr and "--nproc-per-node 2" in proc.stderr


FSDP = ("--set", "model.parallel=fsdp")


@pytest.fixture(scope="module")
def sharded(tmp_path_factory):
    out = tmp_path_factory.mktemp("fsdp") / "run"
    proc = _train(out, more=FSDP)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out


def test_a_sharded_run_follows_the_ddp_run(uninterrupted, sharded):
    """The same SFT and RL steps with every rank a whole copy (DDP) or a half (FSDP2): the losses and
    gradient norms agree to fp32 noise, and the saved checkpoint holds the whole weights, equal to the
    DDP run's. (FSDP forwards a group's prompt in every row instead of once, and reduce-scatters in
    another order: ~1e-5 relative on SFT's gradient norm; the RL steps' norms, ~6e-5 from advantages
    that nearly cancel, carry that noise amplified, ~1e-2.)"""
    from safetensors.torch import load_file

    rows, want = _metrics(sharded), _metrics(uninterrupted)
    assert [(r.get("stage"), r.get("step")) for r in rows] == [(r.get("stage"), r.get("step")) for r in want]
    trained = [(r, w) for r, w in zip(rows, want) if r.get("stage") in ("sft", "rl")]
    assert len(trained) == 5
    for r, w in trained:
        assert r["loss"] == pytest.approx(w["loss"], rel=1e-4, abs=1e-6), r["step"]
        assert r["grad_norm"] == pytest.approx(w["grad_norm"], rel=1e-3 if r["stage"] == "sft" else 2e-2), r["step"]
    for stage in ("sft", "rl"):
        got = load_file(sharded / "checkpoints" / stage / "model.safetensors")
        ref = load_file(uninterrupted / "checkpoints" / stage / "model.safetensors")
        assert got.keys() == ref.keys()  # whole tensors, the tied head saved once
        assert all(got[k].shape == ref[k].shape for k in ref)
    # after SFT's two steps (gradients of norm ~1.5) the weights agree; RL's Adam steps turn the noise of
    # its ~6e-5 gradients into moves of up to lr (1e-3) a step, so its weights are not compared
    sft = [load_file(run / "checkpoints" / "sft" / "model.safetensors") for run in (sharded, uninterrupted)]
    assert max(float((sft[0][k] - sft[1][k]).abs().max()) for k in sft[1]) < 1e-4


@pytest.mark.slow  # a minute; make test keeps the sharded state's own resume checks
def test_a_sharded_run_resumes_after_sigkill_as_if_uninterrupted(sharded, tmp_path):
    """Killed while writing its fourth state (RL step 2), resumed from RL step 1: the sharded optimizer
    state (gathered whole, keyed by name) comes back into each rank's shard; the run ends bit for bit
    as the uninterrupted sharded run."""
    out = tmp_path / "run"
    assert "rl-step1" in _killed_and_resumed(out, 4, FSDP)
    _assert_same_run(sharded, out)


def test_a_sharded_state_resumes_only_sharded(sharded, tmp_path):
    out = tmp_path / "run"
    shutil.copytree(sharded, out)
    proc = _train(out, resume=True)
    assert proc.returncode != 0
    assert "--set model.parallel=fsdp" in proc.stderr
