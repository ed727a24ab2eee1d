"""A rollout backend of one's own (docs/rollouts.md): `rollout.backend` names a class, the whole run
samples through it, the docs show the example as it is, and the checks refuse what it cannot mean."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentic_rl.engines.hf import HFSession
from agentic_rl.trainer.checks import check_config
from agentic_rl.trainer.config import ConfigError, load_config
from agentic_rl.trainer.loop import train

EXAMPLE = "examples/one_task_rollouts.py"
RUN = ["rl.steps=1", "sft.examples=0", "eval.baselines=false", "eval.tasks_per_split=1", "rollout.rng=episode"]


def _train(out: Path, monkeypatch, *overrides) -> tuple[list[int], list[dict]]:
    """The tiny recipe trained with `RUN` and `overrides`: the rows of every engine session it ran,
    and its RL trajectories."""
    sessions, run = [], HFSession.run

    def recorded(self, prompts, *args, **kwargs):
        sessions.append(len(prompts))
        return run(self, prompts, *args, **kwargs)
    with monkeypatch.context() as m:
        m.setattr(HFSession, "run", recorded)
        train(load_config("recipes/tiny.yaml", [*RUN, *overrides, f"output_dir={out}"]))
    rows = map(json.loads, (out / "trajectories" / "rl.jsonl").read_text().splitlines())
    steps = [r for r in map(json.loads, (out / "metrics.jsonl").read_text().splitlines()) if "time_env_s" in r]
    assert steps and all(r["time_env_s"] > 0 for r in steps)  # the envs' time (resets, at least) is counted
    return sessions, [{k: r[k] for k in ("step", "task_id", "token_ids", "reward")} for r in rows]


def test_a_backend_of_ones_own_samples_the_run(tmp_path, monkeypatch):
    """The example backend (a session a task) through train() on the tiny recipe (2 tasks x 4 a
    step): every session of the run holds at most one group (the built-in backend's hold a step's 8
    episodes), and with a generator per episode it samples the built-in backend's trajectories."""
    built_in, want = _train(tmp_path / "built_in", monkeypatch)
    own, got = _train(tmp_path / "own", monkeypatch, f"rollout.backend={EXAMPLE}:OneTaskAtATime")
    assert max(built_in) == 8 and max(own) == 4
    assert got == want and len(got) > 0


def test_the_docs_show_the_example_backend_as_it_is():
    code = Path(EXAMPLE).read_text().split('"""', 2)[2].strip()
    assert code in Path("docs/rollouts.md").read_text()


@pytest.mark.parametrize("overrides, message", [
    ([f"rollout.backend={EXAMPLE}:OneTaskAtATime", "rollout.workers.count=2"], "rollout.workers.count: not with rollout.backend"),
    ([f"rollout.backend={EXAMPLE}:Missing"], "rollout.backend: .* has no function 'Missing'"),
    (["rollout.backend=no_such_file.py:Backend"], "rollout.backend: no such file"),
])
def test_the_checks_refuse_a_backend_they_cannot_build(overrides, message):
    with pytest.raises(ConfigError, match=message):
        check_config(load_config("recipes/tiny.yaml", overrides))
