"""Resumable run state: everything a killed run needs to continue exactly where it stopped.

A state checkpoint is a directory under `<run>/checkpoints/state/`, named by a sequence number and
what it follows (`0003-rl-step2`), holding:

- `progress.json`: which stages are done, the RL step, the results so far, the live values of the RL
  knobs that remediations change, the sizes of `metrics.jsonl` and every trajectory file (a resume
  cuts them back to these sizes, so no step is logged twice or lost), the logger's and the engine's
  counters, and the metric value for best-by-metric retention;
- `model.pt` (the policy's full state dict, LoRA adapters included; absent while the weights are still
  the ones `prepare()` loads), `optimizer.pt`, `critic.pt`;
- `extras.pt`: RNG states (Python, NumPy, torch), the task sampler, the collapse monitor, the last
  healthy weights of the rollback remediation and the batches produced for the steps ahead
  (`producer.py`);
- `config.yaml`: the resolved config of the run.

Writes are atomic: the directory is assembled under a temporary name and renamed into place, so a
crash mid-write leaves the previous state intact (and a `.tmp-*` directory the next start removes).
Retention keeps the last `checkpoint.keep_last` states plus the best by `checkpoint.best_metric`.

With `checkpoint.async_save` a state is written in the background: `save` copies every tensor to
host memory and renders the small files, and a writer thread does the rest while training goes on.
One write is in flight at a time; the next `save`, `states()`, `open()` and `wait()` wait for it and
raise what it raised. It is off by default: on a 2-core CPU the writer takes the cores training
needs, and a recipe-sized state (1.6 GB) cost the training thread 4.2 s written in the background
against 4.0 s written in place (`benchmarks/bench_state_save.py`). It pays where the cores are idle
while an accelerator trains.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import os
import random
import shutil
import sys
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
import yaml

from agentic_rl.errors import UserFileError
from agentic_rl.failpoints import failpoint
from agentic_rl.models import sharding
from agentic_rl.registry import Registry
from agentic_rl.trainer.config import CheckpointConfig, Config, to_dict

# checkpoint.best_mode: which of the states' metric values is the best
BEST_MODES: Registry[Callable] = Registry("best mode")
BEST_MODES.register("max")(max)
BEST_MODES.register("min")(min)


@dataclass
class Progress:
    """The small, readable part of a state (progress.json)."""

    seq: int = 0
    stages: list[str] = field(default_factory=list)  # "baselines", "cpt", "sft", "rl" once finished
    rl_step: int = 0
    sft_step: int = 0  # SFT optimizer steps done (states every checkpoint.sft_every steps)
    sft_losses: list[float] = field(default_factory=list)  # their losses, for the graduation report
    cpt_step: int = 0  # continual pre-training optimizer steps done (states every checkpoint.sft_every steps)
    rl_adapter: bool = False  # the weights are in RL's shape (LoRA: the SFT adapter merged, a fresh one on)
    results: dict = field(default_factory=lambda: {"timing_s": {}})
    remedied: dict = field(default_factory=dict)  # RL knobs a remediation changed, with their live values
    files: dict[str, int] = field(default_factory=dict)  # run-dir-relative path -> size in bytes
    logger_step: int = 0
    engine_version: int = 0
    world_size: int = 1  # data-parallel ranks (a state resumes at the same number)
    sharded: bool = False  # the policy sharded over them (model.parallel: fsdp): the optimizer state is keyed by name
    bad_steps: int = 0  # consecutive RL steps skipped for a non-finite loss or gradient
    metric: float | None = None  # checkpoint.best_metric's value at this state
    machine: dict = field(default_factory=dict)  # the threads and dtype the run resolved at its start (kept on resume)


@dataclass
class SavedState:
    path: Path
    progress: Progress

    def load(self, name: str) -> Any:
        """One of the state's torch files (None when absent)."""
        f = self.path / f"{name}.pt"
        return torch.load(f, weights_only=False) if f.exists() else None


def capture_rng() -> dict:
    return {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}


def restore_rng(state: dict) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])


class StateStore:
    """The run's state checkpoints: save, find the latest, restore the run's files, retention."""

    def __init__(self, run_dir: Path, cfg: CheckpointConfig, writes: bool = True):
        """`writes`: this process writes the states and cuts the logs (data-parallel: rank 0 only;
        the other ranks read the states it wrote)."""
        self.writes = writes
        self.run_dir = run_dir
        self.root = run_dir / "checkpoints" / "state"
        self.cfg = cfg
        self.seq = 0
        self._writer: threading.Thread | None = None
        self._error: BaseException | None = None

    def states(self) -> list[Path]:
        """The whole states on disk, oldest first (after the write in flight, if any)."""
        self.wait()
        return self._listed()

    def _listed(self) -> list[Path]:
        if not self.root.exists():
            return []
        return sorted(p for p in self.root.iterdir() if p.is_dir() and p.name[:4].isdigit())

    def open(self, resume: str | None) -> SavedState | None:
        """The state to continue from (`resume`: "auto" = the latest, or a state directory), with the
        run's log files cut back to that state; None starts the run afresh, clearing an earlier run's
        logs and states from the folder."""
        self.wait()
        self.run_dir.mkdir(parents=True, exist_ok=True)
        for tmp in self.root.glob(".tmp-*") if self.root.exists() and self.writes else []:  # unfinished writes
            shutil.rmtree(tmp, ignore_errors=True) if tmp.is_dir() else tmp.unlink()
        path = self._find(resume)
        if path is None:
            if resume == "auto" and self.writes:
                print(f"no state to resume in {self.root}: starting afresh", file=sys.stderr)
            if self.writes:
                self._fresh()
            return None
        progress = Progress(**json.loads((path / "progress.json").read_text()))
        self.seq = progress.seq
        if self.writes:  # rank 0 (data-parallel ranks read the same state): it cuts the logs and says so
            self._cut_files(progress.files)
            print(f"resuming from {path} (stages done: {', '.join(progress.stages) or 'none'}, "
                  f"RL step {progress.rl_step})", file=sys.stderr)
        return SavedState(path, progress)

    def _find(self, resume: str | None) -> Path | None:
        if not resume:
            return None
        if resume != "auto":
            path = Path(resume)
            if not (path / "progress.json").exists():
                raise UserFileError(f"--resume {resume}: not a state checkpoint (no progress.json); "
                                        f"states of this run are in {self.root}")
            return path
        found = self.states()
        return found[-1] if found else None

    def _fresh(self) -> None:
        (self.run_dir / "metrics.jsonl").unlink(missing_ok=True)
        shutil.rmtree(self.run_dir / "trajectories", ignore_errors=True)
        shutil.rmtree(self.root, ignore_errors=True)

    def _cut_files(self, sizes: dict[str, int]) -> None:
        """Logs back to their sizes at the state: what was written after it is written again."""
        for path in _log_files(self.run_dir):
            rel = str(path.relative_to(self.run_dir))
            if rel not in sizes:
                path.unlink()
            elif path.stat().st_size > sizes[rel]:
                with path.open("r+b") as f:
                    f.truncate(sizes[rel])

    def save(self, label: str, progress: Progress, model=None, optimizer=None, critic=None,
             extras: dict | None = None, config: Config | None = None) -> Path:
        """Write one state atomically, then apply retention; in the background with
        `checkpoint.async_save`. `model=None`: the weights are the loaded ones."""
        self.wait()
        self.seq += 1
        final = self.root / f"{self.seq:04d}-{label}"
        weights = _weights(model, optimizer, critic)  # every rank: whole tensors of a sharded policy are a collective
        if not self.writes:
            return final
        progress = dataclasses.replace(progress, seq=self.seq, files={
            str(p.relative_to(self.run_dir)): p.stat().st_size for p in _log_files(self.run_dir)})
        texts = {"progress.json": json.dumps(dataclasses.asdict(progress), indent=1)}
        if config is not None:
            texts["config.yaml"] = yaml.safe_dump(to_dict(config), sort_keys=False)
        objects = {"extras": {"rng": capture_rng(), **(extras or {})}}
        objects.update(weights)
        if not self.cfg.async_save:
            self._write(final, texts, objects)
            return final
        objects = _host_copy(objects, {})
        self._writer = threading.Thread(target=self._write_logged, args=(final, texts, objects), name="state-writer")
        self._writer.start()
        return final

    def wait(self) -> None:
        """Wait for the state being written in the background; raise what its writer raised."""
        if self._writer is not None:
            self._writer.join()
            self._writer = None
        if self._error is not None:
            error, self._error = self._error, None
            raise RuntimeError(f"writing a state checkpoint under {self.root} failed: {error}") from error

    def _write_logged(self, final: Path, texts: dict[str, str], objects: dict[str, Any]) -> None:
        try:
            self._write(final, texts, objects)
        except BaseException as e:  # handed to the training thread at its next save or wait
            self._error = e

    def _write(self, final: Path, texts: dict[str, str], objects: dict[str, Any]) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=self.root))
        try:
            for name, text in texts.items():
                (tmp / name).write_text(text)
            for name, obj in objects.items():
                torch.save(obj, tmp / f"{name}.pt")
                if name != "extras":
                    failpoint("state.mid_write")  # tests kill the process here: the state must stay whole
            os.replace(tmp, final)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        self._retain()

    def _retain(self) -> None:
        found = self._listed()
        keep = set(found[-self.cfg.keep_last:]) if self.cfg.keep_last > 0 else set(found)
        if self.cfg.best_metric:
            scored = [(p, json.loads((p / "progress.json").read_text())["metric"]) for p in found]
            scored = [(p, m) for p, m in scored if m is not None]
            if scored:
                keep.add(BEST_MODES.get(self.cfg.best_mode)(scored, key=lambda pm: pm[1])[0])
        for p in found:
            if p not in keep:
                shutil.rmtree(p, ignore_errors=True)

    @property
    def reference_path(self) -> Path:
        """The KL reference's weights (a full-fine-tune policy as RL started), written once."""
        return self.root / "reference.pt"

    def save_reference(self, model) -> None:
        if not self.writes:
            return
        self.root.mkdir(parents=True, exist_ok=True)
        tmp = self.root / ".tmp-reference.pt"
        torch.save(model.state_dict(), tmp)
        os.replace(tmp, self.reference_path)


def _weights(model, optimizer, critic) -> dict[str, Any]:
    """The state dicts a state stores (those given), whole when the policy is sharded."""
    out = {}
    if model is not None:
        out["model"] = sharding.full_state_dict(model)
    if optimizer is not None:
        out["optimizer"] = sharding.optimizer_state(model, optimizer) if model is not None else optimizer.state_dict()
    if critic is not None:
        out["critic"] = critic.state_dict()
    return out


def _host_copy(obj: Any, memo: dict) -> Any:
    """`obj` with every tensor copied to host memory and every container rebuilt, so training can go
    on changing the originals. Tensors that share a storage (tied weights) share their copy, as
    torch.save would store them once."""
    if isinstance(obj, torch.Tensor):
        key = (obj.untyped_storage().data_ptr(), obj.storage_offset(), tuple(obj.shape), obj.stride(), obj.dtype)
        if key not in memo:
            memo[key] = obj.detach().to("cpu", copy=True)
        return memo[key]
    if type(obj) in (dict, OrderedDict):  # state dicts; other mappings are deep-copied whole
        return type(obj)((k, _host_copy(v, memo)) for k, v in obj.items())
    if type(obj) in (list, tuple):
        return type(obj)(_host_copy(v, memo) for v in obj)
    return copy.deepcopy(obj)


def _log_files(run_dir: Path) -> list[Path]:
    """What a resume must cut back: metrics.jsonl and the trajectory files."""
    files = [run_dir / "metrics.jsonl"] if (run_dir / "metrics.jsonl").exists() else []
    traj = run_dir / "trajectories"
    return files + (sorted(p for p in traj.rglob("*") if p.is_file()) if traj.exists() else [])
