"""Full-state resume, proven by killing the real CLI.

The invariant: a run killed with SIGKILL at any point (between steps, mid-step, mid-eval, mid-way
through writing a state checkpoint) and resumed with `--resume auto` — as often as it takes — ends
with the same final parameters, bit for bit, and the same `metrics.jsonl`, line for line, as a run
never interrupted. Only wall-clock and machine fields (`monitor.metrics.MACHINE_PREFIXES`) may differ; the tiny recipe runs
fp32 on one thread, which makes the uninterrupted run itself reproducible (checked first).
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from agentic_rl.monitor.metrics import MACHINE_PREFIXES

ROOT = Path(__file__).resolve().parents[2]
# The tiny model earns no reward, so plain GRPO would never update. An entropy bonus moves the policy
# from step 1; the KL to the reference, paid as a per-token reward, then gives GAE nonzero returns,
# so the value head learns too: every step changes the weights, the critic, the optimizer's moments
# and the curriculum, all of which a resume must restore.
ARGS = ["--set", "rl.steps=4", "--set", "log.progress=false", "--set", "eval.tasks_per_split=4",
        "--set", "rl.algorithm.advantage=gae", "--set", "rl.critic.kind=value_head", "--set", "rl.algorithm.kl_coef=0.05",
        "--set", "rl.algorithm.kl_mode=reward", "--set", "rl.algorithm.entropy_coef=0.01", "--set", "rl.tasks.sampler=pass_rate",
        "--set", "rl.optim.schedule=cosine", "--set", "rl.optim.warmup_steps=1",
        "--set", "sft.batch_size=4", "--set", "checkpoint.sft_every=1"]  # 4 SFT steps, a state after each


CLI = "agentic_rl.cli"
# A tiny run takes 10-20 s here; a run still going after this long has hung.
HANG_S = 300


def _cmd(out: Path, resume: bool, extra: tuple[str, ...] = (), cli: str = CLI) -> list[str]:
    cmd = [sys.executable, "-m", cli, "train", "recipes/tiny.yaml", *ARGS, *extra, "--set", f"output_dir={out}"]
    return cmd + (["--resume"] if resume else [])


def _run(out: Path, resume: bool = False, env: dict | None = None, extra: tuple[str, ...] = (), cli: str = CLI) -> int:
    proc = subprocess.run(_cmd(out, resume, extra, cli), cwd=ROOT, env={**os.environ, **(env or {})},
                          capture_output=True, text=True, timeout=HANG_S)
    if proc.returncode not in (0, -signal.SIGKILL):
        raise AssertionError(proc.stderr[-3000:])
    return proc.returncode


def _kill_after_lines(out: Path, lines: int, extra_s: float, extra: tuple[str, ...] = ()) -> None:
    """Start a fresh run, SIGKILL it `extra_s` seconds after metrics.jsonl reaches `lines` lines."""
    proc = subprocess.Popen(_cmd(out, resume=out.exists(), extra=extra), cwd=ROOT, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    metrics = out / "metrics.jsonl"
    while proc.poll() is None:
        if metrics.exists() and len(metrics.read_text().splitlines()) >= lines:
            time.sleep(extra_s)
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()


def _metrics(out: Path) -> list[dict]:
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in r.items() if not k.startswith(MACHINE_PREFIXES)} for r in rows]


def _weights(out: Path) -> dict[str, torch.Tensor]:
    return load_file(out / "checkpoints" / "rl" / "model.safetensors")


def _assert_same_run(a: Path, b: Path) -> None:
    assert _metrics(a) == _metrics(b)
    for name in ("rl.jsonl",):  # the trajectory files: exact tokens, logprobs and advantages per step
        assert (a / "trajectories" / name).read_bytes() == (b / "trajectories" / name).read_bytes()
    wa, wb = _weights(a), _weights(b)
    assert wa.keys() == wb.keys()
    for k in wa:
        assert torch.equal(wa[k], wb[k]), k


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("reference") / "run"
    assert _run(out) == 0
    return out


def test_uninterrupted_run_is_reproducible(reference, tmp_path):
    """Without this, no resume comparison means anything."""
    _run(tmp_path / "again")
    _assert_same_run(reference, tmp_path / "again")


@pytest.mark.parametrize("nth", [4, pytest.param(15, marks=pytest.mark.slow)])
def test_resume_after_sigkill_mid_checkpoint_write(reference, tmp_path, nth):
    """Killed while state files are written. Files are written in this order: model and optimizer
    of the states after SFT steps 1-3 (files 1-6), the SFT stage's weights (7), then model, optimizer
    and critic after each RL step (8-10, 11-13, 14-16). The 4th file is mid-way through the SFT
    step-2 state, the 15th through the RL step-3 state. The half-written state is a `.tmp-*`
    directory, the states before it are whole, and the resumed run equals the reference."""
    out = tmp_path / "run"
    assert _run(out, env={"AGENTIC_RL_FAILPOINT": f"state.mid_write:{nth}"}) == -signal.SIGKILL
    states = out / "checkpoints" / "state"
    assert any(p.name.startswith(".tmp-") for p in states.iterdir())
    complete = sorted(p for p in states.iterdir() if p.name[:4].isdigit())
    assert complete and all((p / "progress.json").exists() for p in complete)
    assert complete[-1].name.endswith("sft-step1" if nth == 4 else "rl-step2")
    assert _run(out, resume=True) == 0
    assert not any(p.name.startswith(".tmp-") for p in states.iterdir())
    _assert_same_run(reference, out)


@pytest.mark.slow  # make test keeps the kill mid checkpoint write and at a random point
def test_resume_after_sigkill_mid_background_state_write(reference, tmp_path):
    """The same with `checkpoint.async_save`: the process dies in the writer thread, mid-way through
    the RL step-3 state; the resumed run still equals the reference (states written in place). That
    the writer saves the values at save time, not later ones, is test_state_store's (the tiny
    model's write ends before training changes anything, so this run cannot tell)."""
    out, background = tmp_path / "run", ("--set", "checkpoint.async_save=true")
    assert _run(out, env={"AGENTIC_RL_FAILPOINT": "state.mid_write:15"}, extra=background) == -signal.SIGKILL
    complete = sorted(p for p in (out / "checkpoints" / "state").iterdir() if p.name[:4].isdigit())
    assert complete[-1].name.endswith("rl-step2")
    assert _run(out, resume=True, extra=background) == 0
    _assert_same_run(reference, out)


@pytest.mark.parametrize("seed", [0, pytest.param(1, marks=pytest.mark.slow)])
def test_resume_after_random_sigkill(reference, tmp_path, seed):
    rng = random.Random(seed)
    out = tmp_path / "run"
    n = len(_metrics(reference))
    _kill_after_lines(out, rng.randrange(0, n), rng.uniform(0, 2))
    assert _run(out, resume=True) == 0
    _assert_same_run(reference, out)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(2, 7))
def test_resume_after_repeated_random_sigkills(reference, tmp_path, seed):
    """Several kills in one run, each resumed, at points spread over every stage."""
    rng = random.Random(seed)
    out = tmp_path / "run"
    n = len(_metrics(reference))
    for lines in sorted(rng.sample(range(n), 3)):
        _kill_after_lines(out, lines, rng.uniform(0, 2))
    assert _run(out, resume=True) == 0
    _assert_same_run(reference, out)


ASYNC = ("--set", "rl.max_staleness=1")  # rollouts one version ahead: a state holds a batch in flight


@pytest.fixture(scope="module")
def reference_async(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("reference_async") / "run"
    assert _run(out, extra=ASYNC) == 0
    return out


def test_resume_with_a_batch_in_flight_after_sigkill_mid_checkpoint_write(reference_async, tmp_path):
    """At rl.max_staleness 1 the state after RL step 2 holds step 3's batch, produced by step 1's
    weights while step 2 trained; killed mid-way through the step-3 state, the resumed run restores
    that batch (it is not sampled again: the weights that sampled it are gone) and equals the run
    never interrupted."""
    out = tmp_path / "run"
    assert _run(out, env={"AGENTIC_RL_FAILPOINT": "state.mid_write:15"}, extra=ASYNC) == -signal.SIGKILL
    complete = sorted(p for p in (out / "checkpoints" / "state").iterdir() if p.name[:4].isdigit())
    assert complete[-1].name.endswith("rl-step2")
    in_flight = torch.load(complete[-1] / "extras.pt", weights_only=False)["in_flight"]
    versions = {r["step"]: r["weight_version"] for r in _metrics(reference_async) if r.get("stage") == "rl"
                and "weight_version" in r}  # each step's weights after its sync
    assert list(in_flight) == [3] and in_flight[3].version == versions[1]
    assert _run(out, resume=True, extra=ASYNC) == 0
    _assert_same_run(reference_async, out)


@pytest.mark.slow  # make test keeps the kill with a batch in flight mid checkpoint write
@pytest.mark.parametrize("seed", [0])
def test_resume_with_batches_in_flight_after_random_sigkill(reference_async, tmp_path, seed):
    rng = random.Random(seed)
    out = tmp_path / "run"
    n = len(_metrics(reference_async))
    _kill_after_lines(out, rng.randrange(0, n), rng.uniform(0, 2), extra=ASYNC)
    assert _run(out, resume=True, extra=ASYNC) == 0
    _assert_same_run(reference_async, out)


# k = 2 and a rollback after RL step 2 (the collapse monitor made to warn there: `collapse_cli.py`);
# no baselines and 8-token actions, as this run is started several times
ROLLBACK = ("--set", "rl.max_staleness=2", "--set", "rl.collapse.actions=[rollback]", "--set", "eval.baselines=false",
            "--set", "rollout.max_new_tokens=8")
ROLLBACK_AT = {"AGENTIC_RL_TEST_WARN_AT": "2"}
COLLAPSE_CLI = "tests.trainer.collapse_cli"


@pytest.fixture(scope="module")
def reference_rollback(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("reference_rollback") / "run"
    assert _run(out, env=ROLLBACK_AT, extra=ROLLBACK, cli=COLLAPSE_CLI) == 0
    return out


# The batches in flight in the state after each RL step of that run (k = 2: the next two steps',
# but the rollback after step 2 empties its state: nothing is produced again before the step is over)
IN_FLIGHT = {1: [2, 3], 2: [], 3: [4]}


def _kill_mid_rl_state(out: Path, step: int, resumed_from: int | None) -> None:
    """Kill the run mid-way through its state after RL step `step` (after the state's first file):
    a fresh run writes its RL states' files from the 8th on (see
    test_resume_after_sigkill_mid_checkpoint_write), a run resumed from RL step i's state (0: the
    SFT stage's) from the 1st, three a state (model, optimizer, critic)."""
    nth = 8 + 3 * (step - 1) if resumed_from is None else 1 + 3 * (step - 1 - resumed_from)
    env = {**ROLLBACK_AT, "AGENTIC_RL_FAILPOINT": f"state.mid_write:{nth}"}
    assert _run(out, resume=resumed_from is not None, env=env, extra=ROLLBACK, cli=COLLAPSE_CLI) == -signal.SIGKILL


@pytest.mark.parametrize("kills", [pytest.param([2, 3], id="around-the-rollback"),
                                   pytest.param([1, 2, 3, 4], id="every-rl-state", marks=pytest.mark.slow)])
def test_resume_around_a_rollback_with_batches_in_flight(reference_rollback, tmp_path, kills):
    """At k = 2 with a rollback after step 2, killed mid-way through RL states and resumed each time,
    the run ends equal to the one never interrupted. Killed in the state after step 2, it resumes
    from step 1's, which holds the batches of steps 2 and 3; the rollback then drops step 3's
    (restored, not produced by this process) and draws its tasks again from the sampler's state
    before it, which the state holds with the batch. Killed in the state after step 3, it resumes
    from step 2's, written after the rollback. In CI the two kills around the rollback; every RL
    state in `make test-slow`."""
    out, states = tmp_path / "run", tmp_path / "run" / "checkpoints" / "state"
    resumed_from = None
    for step in kills:
        _kill_mid_rl_state(out, step, resumed_from)
        last = sorted(p for p in states.iterdir() if p.name[:4].isdigit())[-1]
        assert last.name.endswith(f"rl-step{step - 1}" if step > 1 else "sft")
        if step > 1:
            assert sorted(torch.load(last / "extras.pt", weights_only=False)["in_flight"]) == IN_FLIGHT[step - 1]
        resumed_from = step - 1
    assert _run(out, resume=True, env=ROLLBACK_AT, extra=ROLLBACK, cli=COLLAPSE_CLI) == 0
    assert [r["step"] for r in _metrics(out) if r.get("rolled_back")] == [2]
    _assert_same_run(reference_rollback, out)
