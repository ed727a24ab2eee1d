"""Tasks from a user's files: JSONL, Parquet, or a Hugging Face `datasets` directory saved with
`save_to_disk`, one task a row.

A row's prompt is its `prompt` column (or `question`), its answer `answer`; `columns` renames them
(`{prompt: problem, answer: solution}`). Optional columns: `id`; `messages`, turns put before the
prompt (a system turn, few-shot pairs); `demonstration`, what solves the task for SFT (an assistant
text, or the messages after the user turn). Every other column goes into `task.meta`, where a
verifier finds what it checks against (`tests`, `schema`, `schema_sql`, `aliases`).

Every mistake in a file is one `UserDataError` naming the file and, where there is one, the line
(1-based) or row (0-based): a missing column, an empty file, a line that is not a JSON object, a
held-out prompt that is also a training prompt.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from agentic_rl.errors import UserDataError, UserFileError
from agentic_rl.types import Task

PROMPT_COLUMNS = ("prompt", "question")
KNOWN = ("id", "prompt", "question", "answer", "messages", "demonstration")


def read_rows(path: str | Path) -> Iterator[tuple[str, dict]]:
    """(where, row) for each row of the file: where is `file:line` for JSONL, `file[row]` otherwise."""
    p = Path(path)
    if not p.exists():
        raise UserFileError(f"task file not found: {p}")
    if p.is_dir():
        yield from _dataset_rows(p)
    elif p.suffix == ".parquet":
        import pyarrow.parquet as pq

        for i, row in enumerate(pq.read_table(p).to_pylist()):
            yield f"{p}[{i}]", row
    else:
        yield from _jsonl_rows(p)


def _jsonl_rows(p: Path) -> Iterator[tuple[str, dict]]:
    with p.open() as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                raise UserDataError(f"{p}:{n}: not a JSON object ({e.msg})") from None
            if not isinstance(row, dict):
                raise UserDataError(f"{p}:{n}: expected a JSON object, got {type(row).__name__}")
            yield f"{p}:{n}", row


def _dataset_rows(p: Path) -> Iterator[tuple[str, dict]]:
    """A `Dataset.save_to_disk` directory; a `DatasetDict` one names its split as `DIR/SPLIT`."""
    try:
        import datasets
    except ImportError:
        raise UserDataError(f"{p}: a datasets directory needs the datasets package (pip install datasets)") from None
    try:
        data = datasets.load_from_disk(str(p))
    except FileNotFoundError as e:
        raise UserDataError(f"{p}: not a directory saved by datasets' save_to_disk ({e})") from None
    if isinstance(data, datasets.DatasetDict):
        raise UserDataError(f"{p}: holds the splits {', '.join(data)}; name one as {p}/{next(iter(data))}")
    for i, row in enumerate(data):
        yield f"{p}[{i}]", dict(row)


def load_tasks(path: str | Path, split: str, columns: Mapping[str, str], reads: Sequence[str]) -> list[Task]:
    """The tasks of one file; `reads`: the fields the verifier needs ("answer" or a meta key)."""
    tasks = [_task(row, where, split, i, columns, reads) for i, (where, row) in enumerate(read_rows(path))]
    if not tasks:
        raise UserDataError(f"{path}: no tasks (the file is empty)")
    return tasks


def _task(row: dict, where: str, split: str, i: int, columns: Mapping[str, str], reads: Sequence[str]) -> Task:
    row = {k: row[v] for k, v in columns.items() if v in row} | {k: v for k, v in row.items() if k not in columns.values()}
    prompt_key = next((k for k in PROMPT_COLUMNS if row.get(k) is not None), None)
    if prompt_key is None:
        raise UserDataError(f"{where}: no prompt (a 'prompt' or 'question' column; env.options.columns renames one); "
                            f"the row has {', '.join(sorted(row)) or 'no columns'}")
    missing = [k for k in reads if row.get(k) is None]
    if missing:
        raise UserDataError(f"{where}: no {missing[0]!r} column, which the verifier checks against")
    meta: dict[str, Any] = {k: v for k, v in row.items() if k not in KNOWN}
    for key in ("messages", "demonstration"):
        if row.get(key) is not None:
            meta[key] = _checked_messages(row[key], where, key)
    meta["split"] = split
    return Task(id=str(row.get("id", f"{split}-{i}")), prompt=str(row[prompt_key]), answer=row.get("answer"), meta=meta)


def _checked_messages(value: Any, where: str, key: str) -> Any:
    if key == "demonstration" and isinstance(value, str):
        return value
    if not (isinstance(value, list) and all(isinstance(m, dict) and "role" in m for m in value)):
        raise UserDataError(f"{where}: {key} must be a list of messages with a 'role' each"
                            + (" (or an assistant text)" if key == "demonstration" else ""))
    return value


def split_tasks(tasks: Sequence[Task], heldout_frac: float, seed: int) -> tuple[list[Task], list[Task]]:
    """A seeded split of one file: (train, heldout), the held-out share rounded up to one task."""
    order = list(tasks)
    random.Random(seed).shuffle(order)
    k = max(1, round(heldout_frac * len(order))) if heldout_frac > 0 else 0
    if k >= len(order):
        raise UserDataError(f"env.options.heldout_frac {heldout_frac} leaves no training task of {len(order)}")
    return order[k:], order[:k]


def check_disjoint(train: Sequence[Task], heldout: Sequence[Task], where: str) -> None:
    """A held-out prompt that is also a training prompt would test what was trained on."""
    seen = {t.prompt.strip() for t in train}
    for t in heldout:
        if t.prompt.strip() in seen:
            raise UserDataError(f"{where}: held-out task {t.id!r} has a prompt that is also in training: "
                                f"{t.prompt.strip()[:80]!r}")


def draw(tasks: Sequence[Task], n: int, seed: int, repeat: bool) -> list[Task]:
    """`n` tasks in a seeded order. Training (`repeat`) goes round the file again, reshuffled each
    time, when it needs more tasks than the file has; a held-out split gives each task at most once."""
    out: list[Task] = []
    rounds = 0
    while len(out) < n:
        order = list(tasks)
        random.Random(seed * 1_000_003 + rounds).shuffle(order)
        out += order[: n - len(out)]
        rounds += 1
        if not repeat:
            break
    return out
