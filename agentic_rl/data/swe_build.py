"""Build the shipped repository-repair instances: `python -m agentic_rl.data.swe_build`.

For each project in `swe_projects/`: run its suite twice on the pristine code (the tests that pass
both times are the baseline), then, kind by kind, try its mutation sites in an order shuffled by
the seed, each in a fresh sandbox. A mutant is kept when its run finished in time, at least one
baseline test now fails (FAIL_TO_PASS), no more than a tenth of them do, no test hung, and its
issue text neither repeats an earlier one nor quotes a changed line. PASS_TO_PASS are the other
baseline tests of the test files FAIL_TO_PASS lives in (what SWE-bench runs: the test files the fix
is judged by). Minutes of CPU, so it runs once and its output ships
(`agentic_rl/data/swe_instances.jsonl.gz`); `--verify N` re-checks a seeded sample of it.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import gzip
import hashlib
import io
import json
import random
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from agentic_rl.data.swe_instances import (
    SHIPPED,
    Instance,
    is_test_path,
    load_shipped,
    project_files,
    project_meta,
    projects,
)
from agentic_rl.data.swe_issue import problem_statement, quotes_any
from agentic_rl.data.swe_mutate import MUTATORS, Mutation, mutate, sites
from agentic_rl.tools.sandbox.repo import RepoConfig, RepoSession


@dataclass(frozen=True)
class Suite:
    """A project's pristine files and the baseline its mutants are judged against."""

    project: str
    files: Mapping[str, str]
    python_path: tuple[str, ...]
    passing: tuple[str, ...]  # the tests that pass on the pristine files, run after run
    limit_s: float  # a mutant's run slower than this is dropped
    config: RepoConfig = RepoConfig()

    @classmethod
    def of(cls, project: str, files: Mapping[str, str], python_path: Sequence[str],
           config: RepoConfig | None = None) -> Suite:
        """The baseline: the tests that pass in two runs; a mutant may take 3x the slower run + 2 s."""
        config = config or RepoConfig()
        runs = [run_suite(files, python_path, config=config) for _ in range(2)]
        passing = tuple(t for t in runs[0].results if all(r.passed(t) for r in runs))
        return cls(project, files, tuple(python_path), passing, 3 * max(r.seconds for r in runs) + 2.0, config)


def run_suite(files: Mapping[str, str], python_path: Sequence[str], selectors: Sequence[str] = (),
              config: RepoConfig | None = None):
    with RepoSession(files, config, python_path=python_path) as session:
        return session.run_tests(selectors)


def judge(suite: Suite, mutation: Mutation, mutated: str, seed: int) -> dict | None:
    """The instance row of one mutant, or None when the tests do not catch it cleanly."""
    passing = suite.passing
    run = run_suite({**suite.files, mutation.file: mutated}, suite.python_path, config=suite.config)
    if run.status != "ok" or run.seconds > suite.limit_s:
        return None
    failing = [t for t in passing if not run.passed(t)]
    if not failing or len(failing) > max(3, len(passing) // 10):
        return None
    records = [run.results.get(t) or {"id": t, "error": "the test did not run"} for t in failing]
    if any("TestTimeout" in r.get("error", "") for r in records):
        return None
    statement = problem_statement(suite.project, records, seed)
    if quotes_any(statement, mutation.telling_lines()):
        return None
    test_files = {t.split("::")[0] for t in failing}
    p2p = [t for t in passing if t not in failing and t.split("::")[0] in test_files]
    return {"problem_statement": statement, "FAIL_TO_PASS": failing, "PASS_TO_PASS": p2p}


def build_project(project: str, seed: int, per_kind: int, workers: int, log=print) -> list[Instance]:
    files = project_files(project)
    suite = Suite.of(project, files, project_meta(project)["python_path"])
    log(f"{project}: {len(suite.passing)} baseline tests pass (a mutant's run may take {suite.limit_s:.1f}s)")
    out, statements = [], set()
    for kind in MUTATORS.names():
        candidates = list(enumerate(sites(files, kind, lambda p: not is_test_path(p))))
        random.Random(f"swe-build/{seed}/{project}/{kind}").shuffle(candidates)
        kept = 0
        with concurrent.futures.ThreadPoolExecutor(workers) as pool:
            for lo in range(0, min(len(candidates), 6 * per_kind), workers):  # in order: the result is the seed's
                chunk = candidates[lo: lo + workers]
                mutants = [(k, *mutate(path, files[path], site)) for k, (path, site) in chunk]
                rows = pool.map(lambda m, kind=kind: judge(suite, m[1], m[2], _seed(seed, project, kind, m[0])), mutants)
                for (k, mutation, _), row in zip(mutants, rows):
                    if row is None or row["problem_statement"] in statements or kept >= per_kind:
                        continue
                    statements.add(row["problem_statement"])
                    kept += 1
                    out.append(Instance(instance_id=f"{project}__{kind}-{k}", project=project, kind=kind,
                                        mutation=mutation, python_path=suite.python_path,
                                        **{k2: (tuple(v) if isinstance(v, list) else v) for k2, v in row.items()}))
                if kept >= per_kind:
                    break
        log(f"  {kind}: {kept} kept of {len(candidates)} sites")
    return out


def _seed(seed: int, project: str, kind: str, k: int) -> int:
    return int(hashlib.sha256(f"{seed}/{project}/{kind}/{k}".encode()).hexdigest()[:8], 16)


def write(instances: Sequence[Instance], path: Path) -> None:
    """gzip-compressed JSONL (the pass-to-pass lists repeat); mtime 0, so a rebuild is byte-identical."""
    text = "".join(json.dumps({k: v for k, v in i.to_dict().items() if k != "split"}) + "\n" for i in instances)
    buffer = io.BytesIO()
    with gzip.GzipFile(fileobj=buffer, mode="wb", mtime=0) as f:
        f.write(text.encode("utf-8"))
    path.write_bytes(buffer.getvalue())


def verify(instance: Instance) -> str | None:
    """None when the instance holds: its FAIL_TO_PASS fail and PASS_TO_PASS pass on the snapshot,
    and all pass once the mutation is reverted; else what is wrong."""
    tests = [*instance.FAIL_TO_PASS, *instance.PASS_TO_PASS]
    buggy = instance.files()
    run = run_suite(buggy, instance.python_path, tests)
    if any(run.passed(t) for t in instance.FAIL_TO_PASS) or not all(run.passed(t) for t in instance.PASS_TO_PASS):
        return f"{instance.instance_id}: on the snapshot, FAIL_TO_PASS do not all fail or PASS_TO_PASS do not all pass"
    fixed = dict(buggy)
    fixed[instance.mutation.file] = instance.mutation.revert(buggy[instance.mutation.file])
    run = run_suite(fixed, instance.python_path, tests)
    if not all(run.passed(t) for t in tests):
        return f"{instance.instance_id}: after the revert, {[t for t in tests if not run.passed(t)][:3]} fail"
    return None


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m agentic_rl.data.swe_build", description=__doc__.split("\n\n")[0])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--per-kind", type=int, default=8, help="instances kept per project and mutation kind")
    p.add_argument("--projects", default="", help="comma-separated (default: all)")
    p.add_argument("--workers", type=int, default=2, help="sandboxes at once")
    p.add_argument("--out", type=Path, default=SHIPPED)
    p.add_argument("--verify", type=int, default=0, metavar="N", help="re-check N seeded shipped instances and exit")
    args = p.parse_args(argv)
    if args.verify:
        sample = random.Random(args.seed).sample(load_shipped(str(args.out)), args.verify)
        problems = [v for v in map(verify, sample) if v]
        print("\n".join(problems) or f"{len(sample)} instances verified")
        return int(bool(problems))
    t0, out = time.perf_counter(), []
    for project in [p for p in args.projects.split(",") if p] or projects():
        out += build_project(project, args.seed, args.per_kind, args.workers)
    write(out, args.out)
    print(f"{len(out)} instances -> {args.out} ({time.perf_counter() - t0:.0f}s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
