"""Task files of `agentic-rl synth`: one JSON object a line with `id`, `prompt`, `answer` and `meta`
(what the `tasks` env reads too: its `prompt` and `answer` columns)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from agentic_rl.errors import UserDataError
from agentic_rl.types import Task


def write_tasks(path: str | Path, tasks: Sequence[Task]) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps({"id": t.id, "prompt": t.prompt, "answer": t.answer, "meta": dict(t.meta)})
                            + "\n" for t in tasks))


def read_tasks(path: str | Path) -> list[Task]:
    from agentic_rl.data.task_files import read_rows

    tasks = []
    for where, row in read_rows(path):
        if not {"id", "prompt", "answer"} <= row.keys():
            raise UserDataError(f"{where}: expected a task object with id, prompt and answer")
        tasks.append(Task(str(row["id"]), str(row["prompt"]), row["answer"], row.get("meta", {})))
    if not tasks:
        raise UserDataError(f"{path}: no tasks")
    return tasks
