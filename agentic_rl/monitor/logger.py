"""Run logging: metrics.jsonl always (one JSON object per step); TensorBoard, MLflow and W&B when
configured. Each optional backend is imported only when asked for, and a missing package is one
clear message (the JSONL is written either way)."""

from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path
from typing import Any


class MetricsLogger:
    def __init__(self, run_dir: Path, tensorboard: bool = True, mlflow: str = "", wandb: str = "",
                 run_name: str = "run", config: dict | None = None):
        """`mlflow`: a tracking URI (a server `http://...`) or a local directory for a file store;
        `wandb`: a project name (set WANDB_MODE=offline to keep it local)."""
        self.path = run_dir / "metrics.jsonl"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = self.path.open("a")
        self._sinks = []
        if tensorboard:
            self._add(_tensorboard, run_dir, "tensorboard")
        if mlflow:
            self._add(_mlflow, mlflow, run_name, config or {}, "mlflow-skinny")
        if wandb:
            self._add(_wandb, wandb, run_name, config or {}, run_dir, "wandb")
        self.global_step = 0

    def _add(self, make, *args) -> None:
        *args, package = args
        try:
            self._sinks.append(make(*args))
        except ImportError:
            print(f"{package} is not installed: `pip install {package}` to log there; "
                  "metrics.jsonl is written either way", file=sys.stderr)

    def log(self, record: dict[str, Any]) -> None:
        """Write one step. `stage` and `step` are added by the caller; non-finite numbers become null."""
        self.global_step += 1
        clean = {k: _jsonable(v) for k, v in record.items()}
        self._file.write(json.dumps(clean) + "\n")
        self._file.flush()
        stage = record.get("stage", "train")
        scalars = {f"{stage}/{k}": v for k, v in clean.items()
                   if isinstance(v, (int, float)) and not isinstance(v, bool) and k != "step"}
        for sink in self._sinks:
            sink.log(scalars, self.global_step)

    def close(self) -> None:
        self._file.close()
        for sink in self._sinks:
            sink.close()


class SilentLogger:
    """The logger of a data-parallel rank other than 0 (rank 0 logs the run): counts, writes nothing."""

    def __init__(self):
        self.global_step = 0

    def log(self, record: dict[str, Any]) -> None:
        self.global_step += 1

    def close(self) -> None:
        pass


class _TensorBoard:
    def __init__(self, writer):
        self.writer = writer

    def log(self, scalars: dict, step: int) -> None:
        for k, v in scalars.items():
            self.writer.add_scalar(k, v, step)

    def close(self) -> None:
        self.writer.close()


def _tensorboard(run_dir: Path) -> _TensorBoard:
    from torch.utils.tensorboard import SummaryWriter

    return _TensorBoard(SummaryWriter(str(run_dir / "tensorboard")))


class _MLflow:
    def __init__(self, mlflow, run):
        self.mlflow, self.run = mlflow, run

    def log(self, scalars: dict, step: int) -> None:
        # MLflow metric names allow '/', not every character a metric key may hold
        self.mlflow.log_metrics({k.replace(":", "_"): float(v) for k, v in scalars.items()}, step=step)

    def close(self) -> None:
        self.mlflow.end_run()


def _mlflow(uri: str, run_name: str, config: dict) -> _MLflow:
    import mlflow

    if "://" not in uri:  # a local directory: MLflow's file store (kept for local runs; needs an opt-in)
        os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
        uri = Path(uri).resolve().as_uri()
    mlflow.set_tracking_uri(uri)
    mlflow.set_experiment("agentic-rl")
    run = mlflow.start_run(run_name=run_name)
    mlflow.log_params({k: str(v)[:250] for k, v in _flatten(config).items()})
    return _MLflow(mlflow, run)


class _WandB:
    def __init__(self, run):
        self.run = run

    def log(self, scalars: dict, step: int) -> None:
        self.run.log(scalars, step=step)

    def close(self) -> None:
        self.run.finish()


def _wandb(project: str, run_name: str, config: dict, run_dir: Path) -> _WandB:
    import wandb

    return _WandB(wandb.init(project=project, name=run_name, config=config, dir=str(run_dir)))


def _flatten(d: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        out.update(_flatten(v, f"{prefix}{k}.") if isinstance(v, dict) else {f"{prefix}{k}": v})
    return out


def _jsonable(v: Any) -> Any:
    if hasattr(v, "item"):
        v = v.item()
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


READABLE_DIGITS = 4  # an accuracy of n <= 5000 episodes rounded to 4 places still gives its count back


def readable(obj: Any, digits: int = READABLE_DIGITS) -> Any:
    """`obj` with every float rounded to `digits` places, for the files people read (eval.json): no
    0.42000000000000004 from a sum of tenths. The raw numbers (metrics.jsonl, trajectories) keep
    full precision."""
    if isinstance(obj, float):
        return round(obj, digits) if math.isfinite(obj) else obj
    if isinstance(obj, dict):
        return {k: readable(v, digits) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [readable(v, digits) for v in obj]
    return obj


def write_readable(path: Path, obj: Any) -> None:
    """`obj` as indented JSON at `path`, its floats `readable`."""
    path.write_text(json.dumps(readable(obj), indent=2))
