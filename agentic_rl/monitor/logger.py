"""Run logging: metrics.jsonl always (one JSON object per step), TensorBoard when installed and asked."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any


class MetricsLogger:
    def __init__(self, run_dir: Path, tensorboard: bool = True):
        self.path = run_dir / "metrics.jsonl"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = self.path.open("a")
        self._tb = None
        if tensorboard:
            try:
                from torch.utils.tensorboard import SummaryWriter
            except ImportError:
                print("tensorboard is not installed: `pip install tensorboard` to get curves; "
                      "metrics.jsonl is written either way", file=sys.stderr)
            else:
                self._tb = SummaryWriter(str(run_dir / "tensorboard"))
        self.global_step = 0

    def log(self, record: dict[str, Any]) -> None:
        """Write one step. `stage` and `step` are added by the caller; non-finite numbers become null."""
        self.global_step += 1
        clean = {k: _jsonable(v) for k, v in record.items()}
        self._file.write(json.dumps(clean) + "\n")
        self._file.flush()
        if self._tb is not None:
            stage = record.get("stage", "train")
            for k, v in clean.items():
                if isinstance(v, (int, float)) and not isinstance(v, bool) and k != "step":
                    self._tb.add_scalar(f"{stage}/{k}", v, self.global_step)

    def close(self) -> None:
        self._file.close()
        if self._tb is not None:
            self._tb.close()


def _jsonable(v: Any) -> Any:
    if hasattr(v, "item"):
        v = v.item()
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v
