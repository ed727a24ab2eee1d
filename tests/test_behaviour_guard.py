"""The behaviour guard (`tests/guard/`): fixed runs in fp32 on one thread whose outputs — metrics,
trajectories, evaluations, every weight tensor — must stay exactly as recorded. A refactor that
changes a number fails here; a deliberate change of behaviour re-records the reference in its own
commit (`python -m tests.guard record CASE`).

The tiny-model cases take seconds and run in `make test`; the calculator case (the real model, SFT
then 2 GRPO steps, about 7 minutes) is marked slow. A reference holds on the CPU kind it was
recorded on (float kernels differ between instruction sets); elsewhere the cases are skipped.
"""

from __future__ import annotations

import difflib

import pytest

from tests.guard import CASES, machine, recorded_machine, reference, run_case


def _params():
    for name in CASES:
        marks = [pytest.mark.slow] if not name.startswith("tiny") else []
        yield pytest.param(name, marks=marks, id=name)


@pytest.mark.parametrize("name", _params())
def test_runs_are_byte_identical_to_the_reference(name, tmp_path):
    if recorded_machine(name) != machine():
        pytest.skip(f"reference recorded on {recorded_machine(name)}, this machine is {machine()}")
    got, want = run_case(name, tmp_path / name), reference(name)
    assert sorted(got) == sorted(want)
    for file in sorted(want):
        if got[file] != want[file]:
            diff = "".join(list(difflib.unified_diff(want[file].splitlines(True), got[file].splitlines(True),
                                                     f"reference/{file}", f"now/{file}", n=0))[:12])
            pytest.fail(f"{name}: {file} differs from the reference\n{diff}")
