"""`python -m tests.guard record [CASE ...]` records the reference of the named cases (all by default);
`python -m tests.guard check [CASE ...]` runs them and prints which files differ. Both run each case in a
process of its own with the pinned environment (`PINNED`); `run CASE --out DIR` is that process."""

from __future__ import annotations

import argparse
import difflib
import json
import os
import sys
import tempfile
from pathlib import Path

from tests.guard import CASES, PINNED, mismatch, record, reference, run_case, run_pinned


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.guard")
    parser.add_argument("action", choices=["record", "check", "run"])
    parser.add_argument("cases", nargs="*", default=list(CASES))
    parser.add_argument("--out", type=Path, help="run: the run folder (its normalized files go beside it)")
    args = parser.parse_args()
    if args.action == "run":
        return _run(args.cases, args.out)
    failed = 0
    for name in args.cases:
        with tempfile.TemporaryDirectory() as tmp:
            if args.action == "record":
                record(name, Path(tmp) / name)
                print(f"{name}: recorded")
                continue
            if (why := mismatch(name)) is not None:
                print(f"{name}: {why}")
                failed += 1
                continue
            got, want = run_pinned(name, Path(tmp) / name), reference(name)
            bad = sorted(k for k in set(got) | set(want) if got.get(k) != want.get(k))
            print(f"{name}: {'identical' if not bad else 'DIFFERS in ' + ', '.join(bad)}")
            for k in bad[:3]:
                sys.stdout.writelines(list(difflib.unified_diff(want.get(k, "").splitlines(True),
                                                                got.get(k, "").splitlines(True),
                                                                f"reference/{k}", f"now/{k}", n=0))[:20])
            failed += bool(bad)
    return 1 if failed else 0


def _run(cases: list[str], out: Path | None) -> int:
    """One case in this process, which must have the pinned environment from its start."""
    unpinned = {k: os.environ.get(k) for k, v in PINNED.items() if os.environ.get(k) != v}
    if len(cases) != 1 or out is None or unpinned:
        print(f"run takes one case and --out, in the environment {PINNED} (not pinned here: {unpinned})")
        return 2
    files = run_case(cases[0], out)
    (out.parent / f"{cases[0]}.normalized.json").write_text(json.dumps(files))
    return 0


if __name__ == "__main__":
    sys.exit(main())
