"""Every user mistake we tried, through the real command line: one clear line naming what is wrong,
exit code 2, no traceback, and no run folder touched.

`python tests/test_user_mistakes.py` prints the table in docs/reliability.md#every-user-mistake-we-tried
from these same cases.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
from pathlib import Path

import pytest

from agentic_rl.cli import main

ROOT = Path(__file__).resolve().parents[1]
TINY = str(ROOT / "recipes" / "tiny.yaml")

TASKS = ["--set", "env.name=tasks", "--set", "eval.splits=[heldout]"]  # the tasks env: a user's own files

# (mistake, argv with {tmp} for the case's scratch folder, what the message must say)
CASES = [
    ("misspelt key", ["train", TINY, "--set", "rl.stpes=3"], "unknown key 'rl.stpes' (did you mean 'rl.steps'?)"),
    ("unknown section", ["train", TINY, "--set", "trainer.steps=3"], "unknown key 'trainer'"),
    ("a word for a number", ["train", TINY, "--set", "rl.steps=three"], "rl.steps: expected int"),
    ("a fraction for a count", ["train", TINY, "--set", "rl.tasks.group_size=2.5"], "rl.tasks.group_size: expected int"),
    ("a number for a section", ["train", TINY, "--set", "rl=3"], "rl: expected a section"),
    ("--set without a value", ["train", TINY, "--set", "rl.steps"], "expected key=value"),
    ("one sample per group", ["train", TINY, "--set", "rl.tasks.group_size=1"], "rl.tasks.group_size must be >= 2"),
    ("negative learning rate", ["train", TINY, "--set", "rl.optim.lr=-1e-6"], "rl.optim.lr must be > 0"),
    ("top-p above 1", ["train", TINY, "--set", "rollout.top_p=1.5"], "rollout.top_p must be in (0, 1]"),
    ("greedy RL rollouts", ["train", TINY, "--set", "rollout.temperature=0"], "rollout.temperature: 0 is greedy decoding"),
    ("top-p below 1 for RL", ["train", TINY, "--set", "rollout.top_p=0.9"], "RL needs rollout.top_p: 1"),
    ("zero-token turns", ["train", TINY, "--set", "rollout.max_new_tokens=0"], "rollout.max_new_tokens must be >= 1"),
    ("unsupported precision", ["train", TINY, "--set", "model.precision=fp16"], "model.precision: unknown precision 'fp16'; known: auto, bf16, fp32"),
    ("GAE without a critic", ["train", TINY, "--set", "rl.algorithm.advantage=gae"], "rl.algorithm.advantage: gae needs a critic"),
    ("a critic without GAE", ["train", TINY, "--set", "rl.critic.kind=value_head"], "rl.critic.kind: a critic is only used by rl.algorithm.advantage: gae"),
    ("critic model without a critic", ["train", TINY, "--set", "rl.critic.model=x"], "rl.critic.model is only used"),
    ("misspelt advantage estimator", ["train", TINY, "--set", "rl.algorithm.advantage=grpoo"], "rl.algorithm.advantage: unknown"),
    ("misspelt policy loss", ["train", TINY, "--set", "rl.algorithm.policy_loss=ppo"], "rl.algorithm.policy_loss: unknown"),
    ("misspelt aggregation", ["train", TINY, "--set", "rl.algorithm.aggregation=mean"], "rl.algorithm.aggregation: unknown"),
    ("unknown remediation", ["train", TINY, "--set", "rl.collapse.actions=[panic]"], "rl.collapse.actions: unknown"),
    ("unknown process reward", ["train", TINY, "--set", "rl.algorithm.process_reward=prm"], "rl.algorithm.process_reward: unknown"),
    ("overlong buffer past the budget", ["train", TINY, "--set", "rl.algorithm.overlong_buffer=999"], "rl.algorithm.overlong_buffer must"),
    ("a knob of the RL section's subsections", ["train", TINY, "--set", "rl.lr=1e-5"],
     "unknown key 'rl.lr' (did you mean 'rl.optim.lr'?)"),
    ("a removed knob", ["train", TINY, "--set", "rollout.greedy_per_group=1"], "unknown key 'rollout.greedy_per_group'"),
    ("held-out share of 1", ["train", TINY, "--set", "sft.heldout=1"], "sft.heldout must be in [0, 1)"),
    ("misspelt RL split", ["train", TINY, "--set", "rl.tasks.splits=[train, extra]"], "rl.tasks.splits: env 'calculator' has no split 'extra'"),
    ("RL on an eval split", ["train", TINY, "--set", "rl.tasks.splits=[train, heldout_out]"], "'heldout_out' is a held-out or eval split"),
    ("misspelt env", ["train", TINY, "--set", "env.name=calculater"], "env.name: unknown env 'calculater'"),
    ("misspelt env option", ["train", TINY, "--set", "env.options.fromat=openai"], "env.options.fromat"),
    ("unknown tool-call format", ["train", TINY, "--set", "env.options.format=xml"], "env.options: unknown tool-call format 'xml'"),
    ("an option value of the wrong kind", ["train", TINY, "--set", "env.name=search_r1", "--set", "env.options.top_k=many"],
     "env.options: env 'search_r1' rejects its options"),
    ("bad best-checkpoint mode", ["train", TINY, "--set", "checkpoint.best_mode=top"], "checkpoint.best_mode"),
    ("recipe file missing", ["train", "recipes/nope.yaml"], "recipe file not found"),
    ("recipe is a list", ["train", "{tmp}/list.yaml"], "a recipe must be a mapping"),
    ("model directory missing", ["train", TINY, "--set", "model.name=./no-such-model"], "model.name: no such model"),
    ("distillation teacher missing", ["train", TINY, "--set", "distill.teachers=[./no-teacher]"],
     "distill.teachers: no such model directory"),
    ("SFT data file missing", ["train", TINY, "--set", "sft.data={tmp}/none.jsonl"], "sft.data: file not found"),
    ("SFT data with a broken line", ["train", TINY, "--set", "sft.data={tmp}/bad_sft.jsonl",
                                     "--set", "output_dir={tmp}/run"], "bad_sft.jsonl:2:"),
    ("eval without the checkpoint", ["eval", TINY, "--checkpoint", "{tmp}/nothing"], "--checkpoint: "),
    ("eval tasks with a broken line", ["eval", TINY, "--checkpoint", "{tmp}", "--tasks", "{tmp}/bad_tasks.jsonl"],
     "bad_tasks.jsonl:2: expected a JSON object with 'prompt' and 'answer'"),
    ("task file missing", ["train", TINY, *TASKS, "--set", "env.options.train={tmp}/none.jsonl"], "task file not found"),
    ("task file with a row missing its answer", ["train", TINY, *TASKS, "--set", "env.options.train={tmp}/bad_tasks.jsonl"],
     "bad_tasks.jsonl:2: no 'answer' column, which the verifier checks against"),
    ("task file that is empty", ["train", TINY, *TASKS, "--set", "env.options.train={tmp}/empty.jsonl"],
     "empty.jsonl: no tasks (the file is empty)"),
    ("held-out prompt also in training", ["train", TINY, *TASKS, "--set", "env.options.train={tmp}/tasks.jsonl",
                                          "--set", "env.options.heldout={tmp}/tasks.jsonl"], "also in training"),
    ("misspelt verifier", ["train", TINY, *TASKS, "--set", "env.options.train={tmp}/tasks.jsonl",
                           "--set", "env.options.verifier=maths"], "unknown verifier 'maths'"),
    ("resume from a folder that is not a state", ["train", TINY, "--resume", "{tmp}", "--set", "output_dir={tmp}/run"],
     "not a state checkpoint"),
]


def _scratch(tmp: Path) -> None:
    (tmp / "list.yaml").write_text("- rl\n- sft\n")
    good = {"messages": [{"role": "user", "content": "1+1?"}, {"role": "assistant", "content": "<answer>2</answer>"}]}
    (tmp / "bad_sft.jsonl").write_text(json.dumps(good) + "\n{not json\n")
    (tmp / "bad_tasks.jsonl").write_text('{"prompt": "1+1?", "answer": "2"}\n{"prompt": "no answer"}\n')
    (tmp / "empty.jsonl").write_text("")
    (tmp / "tasks.jsonl").write_text("".join(json.dumps({"prompt": f"{i}+1?", "answer": str(i + 1)}) + "\n" for i in range(5)))


def run_case(argv: list[str], tmp: Path) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main([a.replace("{tmp}", str(tmp)) for a in argv])
    return code, err.getvalue().strip().splitlines()[-1] if err.getvalue().strip() else ""


@pytest.mark.parametrize("mistake,argv,expected", CASES, ids=[c[0] for c in CASES])
def test_a_mistake_gets_one_clear_line(mistake, argv, expected, tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    _scratch(tmp_path)
    code, line = run_case(argv, tmp_path)
    assert code == 2
    assert line.startswith("agentic-rl: error: ") and expected in line, line
    assert "Traceback" not in line


@pytest.mark.parametrize("bug", [KeyError("'step'"), ValueError("shapes (3,) and (4,) differ"), TypeError("x")])
def test_a_bug_keeps_its_traceback(bug, monkeypatch, capsys):
    """An exception that is not a user's mistake (here raised inside the run, as a bug of ours would be)
    leaves `main` with its traceback (the interpreter's exit 1), never as a one-line 'error' of exit 2."""
    from agentic_rl.trainer import loop

    def broken(*args, **kwargs):
        raise bug

    monkeypatch.setattr(loop, "train", broken)
    monkeypatch.chdir(ROOT)
    with pytest.raises(type(bug)):
        main(["train", TINY])
    assert "agentic-rl: error" not in capsys.readouterr().err


def test_a_bug_in_an_env_check_keeps_its_traceback(monkeypatch):
    from agentic_rl.rollout import conformance

    def broken(*args, **kwargs):
        raise KeyError("a bug, not an unknown env")

    monkeypatch.setattr(conformance, "check_env", broken)
    with pytest.raises(KeyError):
        main(["check-env", "calculator"])


def test_there_are_at_least_twenty_mistakes():
    assert len(CASES) >= 20


if __name__ == "__main__":  # the docs table, from a real run of every case
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        _scratch(tmp)
        print("| mistake | command | message |\n|---|---|---|")
        for mistake, argv, _ in CASES:
            _, line = run_case(argv, tmp)
            shown = " ".join(a.replace(TINY, "recipes/tiny.yaml").replace("{tmp}", "DIR") for a in argv)
            print(f"| {mistake} | `agentic-rl {shown}` | `{line.replace(str(tmp), 'DIR').replace('|', '/')}` |")
    sys.exit(0)
