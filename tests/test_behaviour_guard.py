"""The behaviour guard (`tests/guard/`): fixed runs in fp32 on one thread whose outputs — metrics,
trajectories, evaluations, every weight tensor — must stay exactly as recorded. A refactor that
changes a number fails here; a deliberate change of behaviour re-records the reference in its own
commit (`python -m tests.guard record CASE`).

The tiny-model cases take seconds and run in `make test`; the calculator case (the real model, SFT
then 2 GRPO steps, about 7 minutes) is marked slow. Each case runs in a process of its own with its
float kernels pinned (`tests/guard/__init__.py`); a case keeps a reference per machine key it was
recorded on (CPU vendor and kernel set, library versions), and on a machine of no recorded key it
skips, naming what differs.
"""

from __future__ import annotations

import difflib

import pytest

from tests.guard import CASES, REFERENCE, mismatch, reference, run_pinned

FAST = ("tiny", "tiny_kl_entropy", "tiny_gae", "tiny_agent_reward", "tiny_packed")  # make test; the others in make test-slow


def _params():
    for name in CASES:
        marks = [] if name in FAST else [pytest.mark.slow]
        yield pytest.param(name, marks=marks, id=name)


@pytest.mark.parametrize("name", _params())
def test_runs_are_byte_identical_to_the_reference(name, tmp_path):
    if (why := mismatch(name)) is not None:
        pytest.skip(why)
    got, want = run_pinned(name, tmp_path / name), reference(name)
    assert sorted(got) == sorted(want)
    for file in sorted(want):
        if got[file] != want[file]:
            diff = "".join(list(difflib.unified_diff(want[file].splitlines(True), got[file].splitlines(True),
                                                     f"reference/{file}", f"now/{file}", n=0))[:12])
            pytest.fail(f"{name}: {file} differs from the reference\n{diff}")


def test_some_fast_case_trains_a_reward_and_clips_and_masks_tokens():
    """The policy-gradient path is guarded too: in a fast case's reference, RL has reward spread, and
    PPO's clip and the rollout correction's mask each act on some token."""
    import json

    rows = [json.loads(line) for name in CASES if name.startswith("tiny")
            for path in sorted((REFERENCE / name).glob("*/metrics.jsonl")) for line in path.read_text().splitlines()]
    rl = [r for r in rows if r.get("stage") == "rl"]
    assert any(r["reward_std"] > 0 and r["trained_tokens"] > 0 for r in rl)
    assert any(r["clip_frac"] > 0 for r in rl)
    assert any(r.get("correction_masked_frac", 0) > 0 for r in rl)


def test_a_reference_from_another_machine_key_is_skipped_with_the_field_that_differs(monkeypatch, tmp_path):
    """Each recorded key is compared with this machine's: one that matches holds, and with none the
    message names each field that differs."""
    import json

    import tests.guard as guard

    here = guard.machine()
    for label, vendor in (("a", "AuthenticAMD"), ("b", "SomeOtherVendor")):
        (tmp_path / "tiny" / label).mkdir(parents=True)
        (tmp_path / "tiny" / label / "machine.json").write_text(json.dumps({**here, "cpu_vendor": vendor}))
    monkeypatch.setattr(guard, "REFERENCE", tmp_path)
    monkeypatch.setattr(guard, "machine", lambda: {**here, "cpu_vendor": "ThirdVendor"})
    why = guard.mismatch("tiny")
    assert why is not None and "cpu_vendor 'AuthenticAMD' there, 'ThirdVendor' here" in why
    assert "cpu_vendor 'SomeOtherVendor' there" in why
    monkeypatch.setattr(guard, "machine", lambda: {**here, "cpu_vendor": "SomeOtherVendor"})
    assert guard.mismatch("tiny") is None and guard.reference_dir("tiny") == tmp_path / "tiny" / "b"
