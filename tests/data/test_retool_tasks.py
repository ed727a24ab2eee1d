"""ReTool tasks: deterministic, split at the generator level (held-out families never trained) and
by question hash between train and in-distribution eval; demonstration programs compute the answer."""

from __future__ import annotations

import subprocess
import sys

from agentic_rl.data import retool


def test_deterministic_and_split():
    a = retool.make_tasks(40, 0, "train")
    assert a == retool.make_tasks(40, 0, "train") and a != retool.make_tasks(40, 1, "train")
    assert {t.meta["family"] for t in a} <= set(retool.TRAIN_FAMILIES)
    assert {t.meta["family"] for t in retool.make_tasks(20, 0, "heldout_out")} <= set(retool.HELDOUT_FAMILIES)
    # train and heldout_in share generators; the question hash keeps them apart for any seeds
    train = {t.prompt for s in range(3) for t in retool.make_tasks(100, s, "train")}
    held = {t.prompt for t in retool.make_tasks(100, 0, "heldout_in")}
    assert not train & held
    assert all(retool._bucket(p) == 0 for p in held) and all(retool._bucket(p) != 0 for p in train)


def test_demonstration_programs_print_the_answer():
    """Run in a plain interpreter here; the env runs the same programs in the sandbox."""
    for task in retool.make_tasks(15, 3, "train"):
        program = retool.demonstration_program(task)
        out = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=30).stdout
        assert float(out.split()[0]) == float(task.answer), (task.prompt, program, out)
