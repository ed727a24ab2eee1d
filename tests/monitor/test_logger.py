"""Loggers: metrics.jsonl always; TensorBoard event files and an MLflow local store hold the same
step metrics; a missing optional package is one message, not a crash."""

from __future__ import annotations

import json

import pytest

from agentic_rl.monitor.logger import MetricsLogger, readable, write_readable

STEPS = [{"step": s, "stage": "rl", "reward_mean": 0.1 * s, "entropy": 1.0 / s, "note": "x"} for s in (1, 2, 3)]


def test_jsonl_and_tensorboard(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    logger = MetricsLogger(tmp_path, tensorboard=True)
    for r in STEPS:
        logger.log(r)
    logger.log({"step": 3, "stage": "rl", "nan_metric": float("nan")})
    logger.close()
    lines = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [r["reward_mean"] for r in lines[:3]] == pytest.approx([0.1, 0.2, 0.3]) and lines[3]["nan_metric"] is None
    events = EventAccumulator(str(tmp_path / "tensorboard"))
    events.Reload()
    assert [round(e.value, 4) for e in events.Scalars("rl/reward_mean")] == [0.1, 0.2, 0.3]


def test_mlflow_local_store(tmp_path):
    pytest.importorskip("mlflow")
    from mlflow.tracking import MlflowClient

    store = tmp_path / "mlruns"
    logger = MetricsLogger(tmp_path, tensorboard=False, mlflow=str(store), run_name="demo", config={"rl": {"optim": {"lr": 1e-6}}})
    for r in STEPS:
        logger.log(r)
    run_id = logger._sinks[0].run.info.run_id
    logger.close()
    client = MlflowClient(store.resolve().as_uri())
    history = client.get_metric_history(run_id, "rl/reward_mean")
    assert [(m.step, round(m.value, 4)) for m in history] == [(1, 0.1), (2, 0.2), (3, 0.3)]
    assert client.get_run(run_id).data.params["rl.optim.lr"] == "1e-06"


def test_a_missing_backend_is_a_message(tmp_path, capsys, monkeypatch):
    import builtins

    real = builtins.__import__
    monkeypatch.setattr(builtins, "__import__", lambda name, *a, **k: (_ for _ in ()).throw(ImportError(name))
                        if name == "wandb" else real(name, *a, **k))
    logger = MetricsLogger(tmp_path, tensorboard=False, wandb="proj")
    logger.log(STEPS[0])
    logger.close()
    assert "wandb is not installed: `pip install wandb`" in capsys.readouterr().err
    assert (tmp_path / "metrics.jsonl").read_text().count("\n") == 1


def test_files_for_people_round_floats_and_keep_counts(tmp_path):
    # 0.1 + 0.2 is 0.30000000000000004 in binary floating point; 6 / 7 = 0.857142857...
    results = {"acc": 0.1 + 0.2, "by": {"t": {"n": 7, "accuracy": 6 / 7}}, "ci": [0.15000000000000002, 1.0],
               "tokens": 8399, "nan": float("nan")}
    write_readable(tmp_path / "eval.json", results)
    text = (tmp_path / "eval.json").read_text()
    assert "0.30000000000000004" not in text and "0.15000000000000002" not in text
    back = json.loads(text)
    assert back["acc"] == 0.3 and back["ci"] == [0.15, 1.0] and back["tokens"] == 8399
    assert back["by"]["t"]["accuracy"] == 0.8571 and round(back["by"]["t"]["accuracy"] * 7) == 6  # the count survives
    assert readable(float("inf")) == float("inf")
