"""The real CLI under `torchrun --nproc-per-node 2` (gloo): rank 0 alone logs and writes states, a
run SIGKILLed mid-checkpoint and resumed under 2 processes ends as the uninterrupted one, and a state
resumes only at the world size that wrote it.

fp32 on one thread a process, per-step rollout seeds and a gloo sum of two values make the
uninterrupted 2-process run reproducible itself; wall-clock fields may differ.
"""

from __future__ import annotations

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


def _train(out: Path, procs: int = 2, resume: bool = False, env: dict | None = None) -> subprocess.CompletedProcess:
    launch = ([sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={procs}", "-m"]
              if procs > 1 else [sys.executable, "-m"])
    cmd = [*launch, "agentic_rl.cli", "train", "recipes/tiny.yaml", *ARGS, "--set", f"output_dir={out}"]
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


def test_resume_under_two_processes_after_sigkill_mid_checkpoint(uninterrupted, tmp_path):
    """Rank 0 is SIGKILLed while writing its third state (torchrun then stops rank 1); the same
    command with --resume finishes the run as if nothing had happened."""
    out = tmp_path / "run"
    killed = _train(out, env={"AGENTIC_RL_FAILPOINT": "state.mid_write:3"})
    assert killed.returncode != 0 and "SIGKILL" in killed.stderr, killed.stderr[-2000:]
    resumed = _train(out, resume=True)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "resuming from" in resumed.stderr
    _assert_same_run(uninterrupted, out)


def test_a_state_resumes_only_at_the_world_size_that_wrote_it(uninterrupted, tmp_path):
    out = tmp_path / "run"
    shutil.copytree(uninterrupted, out)
    proc = _train(out, procs=1, resume=True)
    assert proc.returncode != 0
    assert "written by 2 data-parallel process(es)" in proc.stderr and "--nproc-per-node 2" in proc.stderr
