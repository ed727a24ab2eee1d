"""A served engine's edges (`engines/served.py`, `engines/managed.py`): the weight versions are the
trainer's count (a resumed run's goes on from its state, whatever the server counts), and
per-episode random streams reach the server (`rollout.rng: episode`: a request `seed`). Against our
own server: in a thread (tests/engines/test_served.py's `Server`), or a real `agentic-rl serve`
child process of the tiny recipe (slow: each start is ~13 s on the shared 2-core machine).
"""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path

import pytest

from agentic_rl.engines.base import SamplingParams
from agentic_rl.engines.hf import HFEngine
from agentic_rl.engines.served import ServedEngine
from agentic_rl.engines.server import create_app
from agentic_rl.envs.registry import get_env
from agentic_rl.rollout.loop import episode_seeds, rollout
from agentic_rl.trainer.config import load_config
from agentic_rl.trainer.episodes import episodes
from agentic_rl.trainer.loop import train
from tests.engines.test_served import Server

# the memory check off: it reads what the shared machine has free at the moment, which this test is not about
TINY = ["model.precision=fp32", "log.progress=false", "log.tensorboard=false", "eval.baselines=false",
        "eval.splits=[]", "sft.examples=0", "rollout.engine.name=managed", "model.memory_check=false"]


@pytest.fixture
def server(tiny, tokenizer):
    server = Server(create_app(HFEngine(copy.deepcopy(tiny), tokenizer, "fp32"), tokenizer))
    yield server
    server.stop()


def test_the_version_is_the_trainers_count_not_the_servers(server, tiny, tokenizer):
    """A run resumed at version 5 meets a server that counts from 0: its first sync is version 6,
    and sending the weights the version already names (the start) keeps it."""
    engine = ServedEngine(server.url, tokenizer, tiny, version=5)
    engine.send_weights()
    assert engine.version == 5
    assert engine.sync_weights() == 6 and engine.version == 6
    assert engine._get("/health")["version"] == 2  # the server counted its two loads


def test_a_batch_is_never_fresher_than_the_trainer():
    from agentic_rl.trainer.rl_step import staleness_of

    assert staleness_of(3, 4, 5, 1) == 1
    with pytest.raises(RuntimeError, match="2 versions stale"):
        staleness_of(3, 3, 5, 1)
    with pytest.raises(RuntimeError, match="-1 versions stale"):  # sampled by weights not made yet
        staleness_of(3, 6, 5, 1)


def _episodes(engine, tokenizer, tasks, seeds):
    cfg = load_config("recipes/tiny.yaml", ["rollout.max_new_tokens=6", "rollout.max_turns=2"])
    spec = get_env(cfg.env.name)
    ep = episodes(spec, cfg.env.options, cfg.rollout)
    groups, _ = rollout(engine, ep.make_env, tasks, 2, ep.params, ep.budget, seed=seeds)
    return [[(t.token_ids(), t.infra_failure) for t in g.trajectories] for g in groups]


def test_a_generator_per_episode_reaches_the_server(server, tiny, tokenizer):
    """rollout.rng: episode over HTTP, through the rollout loop: an episode samples the same tokens
    whether its task is rolled out with another or alone (a data-parallel rank's share); other seeds
    sample otherwise."""
    engine = ServedEngine(server.url, tokenizer, tiny)
    tasks = get_env("calculator").tasks("train", 2, 0)
    both = _episodes(engine, tokenizer, tasks, episode_seeds(11, [0, 1], 2))
    second = _episodes(engine, tokenizer, tasks[1:], episode_seeds(11, [1], 2))
    assert second == both[1:] and all(failure is None for g in both for _, failure in g)
    assert _episodes(engine, tokenizer, tasks[1:], episode_seeds(12, [1], 2)) != second


def test_every_action_of_an_episode_samples_from_its_own_seed(server, tiny, tokenizer):
    """Two actions a row, the second after an observation: each row's actions are the same alone
    and beside another row with the same prompt, whose own seed samples other tokens."""
    engine = ServedEngine(server.url, tokenizer, tiny)

    def actions(rows):
        got: dict[int, list] = {}

        def on_stop(row, sample):
            got.setdefault(row, []).append(sample.ids)
            return [5, 6, 7] if len(got[row]) < 2 else None

        engine.session(0, {r: 100 + r for r in rows}).run({r: [10, 11, 12] for r in rows}, SamplingParams(1.0, 1.0, 6),
                                                           on_stop)
        return got

    alone, together = actions([1]), actions([0, 1])
    assert len(alone[1]) == 2 and alone[1] == together[1] and together[0] != together[1]


def _rl_rows(run: Path) -> list[dict]:
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    return [r for r in rows if r.get("stage") == "rl" and "weight_version" in r]


def _killed_after(run: Path, name: str) -> None:
    """The run folder as a kill right after state `name` leaves it: the later states gone (the
    resume cuts the logs back to the state)."""
    states = sorted(p for p in (run / "checkpoints" / "state").iterdir() if p.name[:4].isdigit())
    for p in states[[p.name.endswith(name) for p in states].index(True) + 1:]:
        shutil.rmtree(p)


@pytest.mark.slow
def test_a_resumed_run_counts_weight_versions_on_from_its_state_with_a_fresh_server(tmp_path):
    """At rl.max_staleness 1 the state after RL step 1 holds step 2's batch, sampled by step 1's
    weights. Resumed from it, the run starts a fresh server (its own count at 0) and must still train
    that batch one version stale and log the versions the uninterrupted run logged."""
    cfg = load_config("recipes/tiny.yaml", [*TINY, "rl.steps=2", "rl.max_staleness=1", "checkpoint.every=1",
                                            "checkpoint.keep_last=0",
                                            f"output_dir={tmp_path}"])
    train(cfg)
    uninterrupted = [(r["step"], r["weight_version"], r["staleness"]) for r in _rl_rows(tmp_path)]
    assert [s for _, _, s in uninterrupted] == [0, 1]
    _killed_after(tmp_path, "rl-step1")
    train(cfg, resume="auto")
    resumed = [(r["step"], r["weight_version"], r["staleness"]) for r in _rl_rows(tmp_path)]
    assert resumed == uninterrupted
