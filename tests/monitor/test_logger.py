"""Loggers: metrics.jsonl always; TensorBoard event files and an MLflow local store hold the same
step metrics; a missing optional package is one message, not a crash."""

from __future__ import annotations

import json

import pytest

from agentic_rl.monitor.logger import MetricsLogger

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
