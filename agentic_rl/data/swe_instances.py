"""Repository-repair instances in SWE-bench's schema: the shipped ones (mutants of the projects in
`swe_projects/`, built by `swe_build.py`) and a user's own directory of them.

An instance is a repository snapshot, a `problem_statement`, its `FAIL_TO_PASS` tests (fail on the
snapshot, must pass after the fix) and `PASS_TO_PASS` tests (pass, must still pass), and how its
tests run. A shipped instance's snapshot is its project with the mutation applied; a user's is a
directory (`load_dir`). Splits of the shipped set:

- `heldout_projects`: every instance of the projects in `HELDOUT_PROJECTS`, never trained on;
- `heldout_kinds`: instances of the other projects whose mutation kind is in `HELDOUT_KINDS`;
- `train` and `test`: the rest, `test` being the instances whose id hashes into one bucket in five.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import json
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from agentic_rl.data.swe_mutate import HELDOUT_KINDS, Mutation
from agentic_rl.errors import UserDataError, UserFileError
from agentic_rl.types import Task

PROJECTS_DIR = Path(__file__).parent / "swe_projects"
SHIPPED = Path(__file__).parent / "swe_instances.jsonl.gz"
HELDOUT_PROJECTS = ("jsonpointer", "ordered_set")
SPLITS = ("train", "test", "heldout_projects", "heldout_kinds")
TEST_DIRS = ("tests", "test", "testing")


@dataclass(frozen=True)
class Instance:
    instance_id: str
    problem_statement: str
    FAIL_TO_PASS: tuple[str, ...]
    PASS_TO_PASS: tuple[str, ...]
    project: str = ""
    kind: str = "user"  # the mutation kind of a shipped instance
    mutation: Mutation | None = None  # shipped: applied to the project to make the snapshot
    snapshot: str = ""  # a user's instance: the repository directory
    python_path: tuple[str, ...] = (".",)
    test_command: str = ""  # "" = the sandbox's built-in runner
    log_parser: str = "pytest"
    split: str = "test"
    test_files: tuple[str, ...] = field(default=())  # restored before scoring; () = by name (`is_test_file`)

    def to_dict(self) -> dict:
        out = {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.__dict__.items() if k != "mutation"}
        out["mutation"] = self.mutation.to_dict() if self.mutation else None
        return out

    @classmethod
    def from_dict(cls, row: Mapping) -> Instance:
        known = {k: row[k] for k in cls.__dataclass_fields__ if k in row}
        for key in ("FAIL_TO_PASS", "PASS_TO_PASS", "python_path", "test_files"):
            if key in known:
                value = json.loads(known[key]) if isinstance(known[key], str) else known[key]  # SWE-bench ships JSON strings
                known[key] = (value,) if isinstance(value, str) else tuple(value)
        if known.get("mutation"):
            known["mutation"] = Mutation(**known["mutation"])
        return cls(**known)

    def is_test_file(self, path: str) -> bool:
        """Test files are restored before scoring: a patch is judged by the tests, never by edits to them."""
        if self.test_files:
            return path in self.test_files
        return path in {t.split("::")[0] for t in (*self.FAIL_TO_PASS, *self.PASS_TO_PASS)} or is_test_path(path)

    def files(self) -> dict[str, str | bytes]:
        """The repository the episode starts from (the bug in place)."""
        if self.mutation is None:
            return dict(_user_tree(self.snapshot))
        files = dict(project_files(self.project))
        files[self.mutation.file] = self.mutation.apply(files[self.mutation.file])
        return files


def is_test_path(path: str) -> bool:
    """A file of the test suite by its name: under a tests/test/testing directory, test_*.py,
    *_test.py or conftest.py."""
    parts = path.split("/")
    name = parts[-1]
    return (any(p in TEST_DIRS for p in parts[:-1]) or name == "conftest.py"
            or (name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py"))))


@functools.lru_cache(maxsize=32)
def project_files(project: str) -> Mapping[str, str]:
    from agentic_rl.tools.sandbox.repo import read_tree

    tree = read_tree(PROJECTS_DIR / project, skip=("project.json",))
    return {k: v.decode("utf-8") for k, v in tree.items()}


@functools.lru_cache(maxsize=64)
def _user_tree(snapshot: str) -> Mapping[str, str | bytes]:
    """A snapshot's files: text where it decodes as UTF-8 (so edits apply), bytes otherwise."""
    from agentic_rl.tools.sandbox.repo import read_tree

    out: dict[str, str | bytes] = {}
    for path, raw in read_tree(snapshot).items():
        try:
            out[path] = raw.decode("utf-8")
        except UnicodeDecodeError:
            out[path] = raw
    return out


def project_meta(project: str) -> dict:
    return json.loads((PROJECTS_DIR / project / "project.json").read_text())


def projects() -> list[str]:
    return sorted(p.name for p in PROJECTS_DIR.iterdir() if (p / "project.json").exists())


def split_of(inst: Instance) -> str:
    if inst.project in HELDOUT_PROJECTS:
        return "heldout_projects"
    if inst.kind in HELDOUT_KINDS:
        return "heldout_kinds"
    bucket = int(hashlib.sha256(inst.instance_id.encode()).hexdigest(), 16) % 5
    return "test" if bucket == 0 else "train"


@functools.lru_cache(maxsize=4)
def load_shipped(path: str = str(SHIPPED)) -> tuple[Instance, ...]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        rows = [Instance.from_dict(json.loads(line)) for line in f if line.strip()]
    return tuple(Instance(**{**r.__dict__, "split": split_of(r)}) for r in rows)


def load_dir(directory: str | Path) -> tuple[Instance, ...]:
    """A user's instances: `DIR/instances.jsonl` (one SWE-bench-schema row a line: instance_id,
    problem_statement, FAIL_TO_PASS, PASS_TO_PASS; optional snapshot (default: the instance_id),
    test_command, log_parser, python_path, split (default "test"), test_files), each snapshot a
    directory under DIR holding the repository with the bug in place."""
    directory = Path(directory).resolve()
    index = directory / "instances.jsonl"
    if not index.is_file():
        raise UserFileError(f"{index}: a directory of instances holds instances.jsonl (docs/envs/swe_repair.md)")
    out = []
    for n, line in enumerate(index.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        row = json.loads(line)
        missing = [k for k in ("instance_id", "problem_statement", "FAIL_TO_PASS", "PASS_TO_PASS") if k not in row]
        if missing:
            raise UserDataError(f"{index}:{n}: missing {', '.join(missing)}")
        snapshot = (directory / row.get("snapshot", row["instance_id"])).resolve()
        if not snapshot.is_dir() or directory not in (snapshot, *snapshot.parents):
            raise UserDataError(f"{index}:{n}: no snapshot directory {snapshot} inside {directory}")
        inst = Instance.from_dict({**row, "snapshot": str(snapshot), "project": row.get("project", row["instance_id"]),
                                   "mutation": None, "kind": "user"})
        if not inst.FAIL_TO_PASS:
            raise UserDataError(f"{index}:{n}: FAIL_TO_PASS is empty: nothing would tell a fix from no fix")
        out.append(inst)
    if not out:
        raise UserDataError(f"{index}: no instances")
    return tuple(out)


def make_tasks(instances: Sequence[Instance], split: str, n: int, seed: int) -> list[Task]:
    """n tasks of `split`, shuffled by seed; past the split's size its instances come round again
    in a fresh order (each repeat its own task id)."""
    pool = [i for i in instances if i.split == split]
    if not pool:
        raise ValueError(f"no instances in split {split!r}")
    rng, tasks, rounds = random.Random(f"swe/{split}/{seed}"), [], 0
    while len(tasks) < n:
        order = rng.sample(pool, len(pool))
        tasks += [to_task(inst, rounds) for inst in order[: n - len(tasks)]]
        rounds += 1
    return tasks


def to_task(inst: Instance, repeat: int = 0) -> Task:
    return Task(id=inst.instance_id + (f"#{repeat}" if repeat else ""), prompt=inst.problem_statement,
                answer=tuple(inst.FAIL_TO_PASS),
                meta={"instance": inst.to_dict(), "project": inst.project, "kind": inst.kind, "split": inst.split})


def instance_of(task: Task) -> Instance:
    return Instance.from_dict(task.meta["instance"])
