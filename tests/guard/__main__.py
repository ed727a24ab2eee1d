"""`python -m tests.guard record [CASE ...]` records the reference of the named cases (all by default);
`python -m tests.guard check [CASE ...]` runs them and prints which files differ."""

from __future__ import annotations

import argparse
import difflib
import sys
import tempfile
from pathlib import Path

from tests.guard import CASES, machine, record, recorded_machine, reference, run_case


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.guard")
    parser.add_argument("action", choices=["record", "check"])
    parser.add_argument("cases", nargs="*", default=list(CASES))
    args = parser.parse_args()
    failed = 0
    for name in args.cases:
        with tempfile.TemporaryDirectory() as tmp:
            if args.action == "record":
                record(name, Path(tmp) / name)
                print(f"{name}: recorded")
                continue
            if recorded_machine(name) != machine():
                print(f"{name}: recorded on {recorded_machine(name)}, this is {machine()}")
            got, want = run_case(name, Path(tmp) / name), reference(name)
            bad = sorted(k for k in set(got) | set(want) if got.get(k) != want.get(k))
            print(f"{name}: {'identical' if not bad else 'DIFFERS in ' + ', '.join(bad)}")
            for k in bad[:3]:
                sys.stdout.writelines(list(difflib.unified_diff(want.get(k, "").splitlines(True),
                                                                got.get(k, "").splitlines(True),
                                                                f"reference/{k}", f"now/{k}", n=0))[:20])
            failed += bool(bad)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
