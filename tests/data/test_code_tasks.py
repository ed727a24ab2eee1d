"""The code tasks: seeded, HumanEval-shaped, their canonical solutions pass their own tests in the
sandbox, and the training pool shares nothing with HumanEval (the held-out suite)."""

from __future__ import annotations

import re

from agentic_rl.data import code_tasks
from agentic_rl.rewards.code_tiers import full_suite, humaneval_tasks


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z]+", text.lower()))


def test_tasks_are_seeded_and_every_family_appears():
    a = code_tasks.make_tasks(80, 2, "train")
    assert a == code_tasks.make_tasks(80, 2, "train") and a != code_tasks.make_tasks(80, 3, "train")
    assert {t.meta["family"] for t in a} == set(code_tasks.FAMILIES)
    assert not {t.prompt for t in a} & {t.prompt for t in code_tasks.make_tasks(80, 2, "heldout_in")}


def test_the_training_pool_shares_nothing_with_humaneval():
    """No entry point in common, and no generated prompt's word set overlaps a HumanEval prompt's by
    more than half (Jaccard); the highest measured is printed by the assertion if it ever fails."""
    human = humaneval_tasks()
    names = {t.meta["entry_point"] for t in human}
    ours = code_tasks.make_tasks(250, 0, "train") + code_tasks.make_tasks(250, 0, "heldout_in")
    assert not names & {n for f in code_tasks.FAMILIES.values() for n in f.names}
    human_words = [_words(t.prompt) for t in human]
    worst = max(len(w & h) / len(w | h) for t in ours for w in [_words(t.prompt)] for h in human_words)
    assert worst <= 0.5, worst


def test_every_familys_canonical_solution_passes_its_tests_in_the_sandbox():
    for family in code_tasks.FAMILIES:
        task = code_tasks.make_task(family, 5, "train")
        assert full_suite(task, task.answer), family
        assert task.meta["test"].count("assert candidate(") == 8


def test_no_humaneval_solution_computes_a_familys_function():
    """Behaviour, not only words: every HumanEval canonical solution of one argument, run in the
    sandbox on each family's test inputs, misses at least one of its expected outputs (so no family is
    a HumanEval problem under another name)."""
    import json

    from agentic_rl.tools.sandbox import SandboxConfig, run_python

    cases = {}
    for family in code_tasks.FAMILIES:
        task = code_tasks.make_task(family, 11, "train")
        cases[family] = task.meta["test"]
    problems = [(t.id, t.meta["prompt"] + t.answer, t.meta["entry_point"]) for t in humaneval_tasks()]
    program = f"""
import json, signal, ast
cases, problems = json.loads({json.dumps(json.dumps(cases))}), json.loads({json.dumps(json.dumps(problems))})
def alarm(*_):
    raise TimeoutError
signal.signal(signal.SIGALRM, alarm)
same = []
for pid, source, entry in problems:
    ns = {{}}
    try:
        exec(source, ns)
    except Exception:
        continue
    for family, test in cases.items():
        signal.alarm(1)
        try:
            exec(test, ns)
            ns["check"](ns[entry])
            same.append([pid, family])
        except BaseException:
            pass
        finally:
            signal.alarm(0)
print(json.dumps(same))
"""
    result = run_python(program, SandboxConfig(timeout_s=120))
    assert result.exit_code == 0, result.stderr[-500:]
    assert json.loads(result.stdout.strip().splitlines()[-1]) == []
