"""The shipped swe_repair instances: their splits, their issue texts, and a seeded sample verified
end to end in the sandbox (FAIL_TO_PASS fail and PASS_TO_PASS pass on the snapshot; all pass once
the mutation is reverted)."""

from __future__ import annotations

import collections
import random
import re
import shutil

import pytest

from agentic_rl.data import swe_instances as data
from agentic_rl.data.swe_build import verify
from agentic_rl.data.swe_mutate import HELDOUT_KINDS, TRAIN_KINDS


def test_hundreds_of_instances_split_by_project_and_by_kind():
    instances = data.load_shipped()
    assert len(instances) >= 300 and len({i.instance_id for i in instances}) == len(instances)
    assert len({i.project for i in instances}) >= 8
    by_split = collections.defaultdict(set)
    for i in instances:
        by_split[i.split].add(i)
        assert bool(i.FAIL_TO_PASS) and not set(i.FAIL_TO_PASS) & set(i.PASS_TO_PASS)
    assert {i.project for i in by_split["heldout_projects"]} == set(data.HELDOUT_PROJECTS)
    trained = by_split["train"] | by_split["test"]
    assert not {i.project for i in trained} & set(data.HELDOUT_PROJECTS)
    assert {i.kind for i in trained} == set(TRAIN_KINDS) and {i.kind for i in by_split["heldout_kinds"]} == set(HELDOUT_KINDS)
    assert all(len(by_split[s]) >= 30 for s in data.SPLITS)


def test_an_issue_never_quotes_the_changed_line_nor_names_the_fix():
    """Neither a mutated line nor an original line it replaced or removed (any with a word in it)."""
    for i in data.load_shipped():
        m = i.mutation
        after = set(m.after.splitlines())
        for line in [*m.after.splitlines(), *m.before.splitlines()]:
            if re.search(r"\w\w", line) and (line not in m.before.splitlines() or line not in after):
                assert line.strip() not in i.problem_statement, (i.instance_id, line)


def test_tasks_are_seeded_and_come_round_again_past_a_split():
    first, again = data.make_tasks(data.load_shipped(), "test", 50, 1), data.make_tasks(data.load_shipped(), "test", 50, 1)
    assert first == again and len({t.id for t in first}) == 50
    assert {data.instance_of(t).instance_id for t in first} == {i.instance_id for i in data.load_shipped() if i.split == "test"}


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")
def test_a_seeded_sample_of_shipped_instances_holds_end_to_end():
    sample = random.Random(0).sample(data.load_shipped(), 3)
    assert [verify(i) for i in sample] == [None] * 3
