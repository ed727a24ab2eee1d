"""W&B end to end, offline: a tiny training run with `log.wandb` writes the run's `.wandb` file, and
the history read back from it — the file's records framed as LevelDB's log format (how wandb-core
writes its transaction log) and decoded with wandb's own protobuf `Record` — holds exactly the
metrics of metrics.jsonl, step by step."""

from __future__ import annotations

import json
import struct

import pytest

BLOCK, HEADER = 32 * 1024, 7  # LevelDB log blocks; the file's header ":W&B", a 2-byte magic, a version byte
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4


def read_records(path) -> list:
    """Every `Record` in a .wandb file, in order."""
    from wandb.proto.wandb_internal_pb2 import Record

    data = path.read_bytes()
    assert data[:4] == b":W&B"
    records, pos, pending = [], HEADER, b""
    while pos + 7 <= len(data):
        if BLOCK - pos % BLOCK < 7:  # a block's tail too short for a header is padding
            pos += BLOCK - pos % BLOCK
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos: pos + 7])
        chunk, pos = data[pos + 7: pos + 7 + length], pos + 7 + length
        if kind == 0 and length == 0:  # zero fill
            continue
        pending = chunk if kind in (FULL, FIRST) else pending + chunk
        if kind in (FULL, LAST):
            record = Record()
            record.ParseFromString(pending)
            records.append(record)
    return records


def history(records) -> dict[int, dict]:
    """step -> the metrics logged at it."""
    steps = {}
    for r in records:
        if r.WhichOneof("record_type") == "history":
            items = {(i.key or "/".join(i.nested_key)): json.loads(i.value_json) for i in r.history.item}
            steps[r.history.step.num] = {k: v for k, v in items.items() if not k.startswith("_")}
    return steps


def test_an_offline_run_holds_the_metrics_of_metrics_jsonl(tmp_path, monkeypatch):
    pytest.importorskip("wandb")
    from agentic_rl import load_config, train, with_values

    for var, value in {"WANDB_MODE": "offline", "WANDB_SILENT": "true", "WANDB_CONFIG_DIR": str(tmp_path / "cfg"),
                       "WANDB_CACHE_DIR": str(tmp_path / "cache"), "WANDB_DATA_DIR": str(tmp_path / "data")}.items():
        monkeypatch.setenv(var, value)
    cfg = with_values(load_config("recipes/tiny.yaml", ["rl.steps=2", "eval.baselines=false", "sft.examples=0",
                                                        "log.wandb=agentic-rl-test"]), {"output_dir": str(tmp_path / "run")})
    train(cfg)
    (run_file,) = (tmp_path / "run" / "wandb").glob("offline-run-*/run-*.wandb")
    logged = history(read_records(run_file))
    lines = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    expected = {}
    for step, line in enumerate(lines, start=1):  # MetricsLogger counts global steps from 1
        stage = line.get("stage", "train")
        expected[step] = {f"{stage}/{k}": v for k, v in line.items()
                          if isinstance(v, (int, float)) and not isinstance(v, bool) and k != "step"}
    assert len(lines) >= 3 and {s for s, m in expected.items() if m} == set(logged)
    for step, metrics in logged.items():
        assert metrics == expected[step], step  # the same floats: JSON both ways, no rounding
    assert any(k.startswith("rl/") for m in logged.values() for k in m)
