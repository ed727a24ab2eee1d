"""Self-distillation with privileged context (`trainer/privileged.py`): the teacher's rows are the
student's with a worked example in the prompt, its log-probabilities line up with the student's
trained tokens, `similar` shows another task of the same kind, and the tiny recipe trains with it."""

from __future__ import annotations

import json
import random
from types import SimpleNamespace

import pytest
import torch

from agentic_rl.envs.registry import get_env
from agentic_rl.models.loader import tiny_model
from agentic_rl.rollout.demos import conversation_trajectory, demonstrate
from agentic_rl.trainer import loop
from agentic_rl.trainer.batching import make_batch
from agentic_rl.trainer.checks import ConfigError, check_config
from agentic_rl.trainer.config import load_config
from agentic_rl.trainer.credit import Credit, with_unadvantaged
from agentic_rl.trainer.privileged import PRIVILEGED, PrivilegedTeacher, insertion, privileged_teacher
from agentic_rl.trainer.teachers import load_teachers


def test_insertion_finds_the_block_wherever_it_is():
    """Invariant: for any P and any block B inserted at any a, Q = P[:a] + B + P[a:] gives back
    (a', B') with P[:a'] + B' + P[a':] == Q (a' may differ from a where B repeats its neighbours)."""
    rng = random.Random(0)
    for _ in range(300):
        plain = [rng.randrange(4) for _ in range(rng.randrange(0, 12))]
        block = [rng.randrange(4) for _ in range(rng.randrange(0, 6))]
        a = rng.randrange(len(plain) + 1)
        shown = plain[:a] + block + plain[a:]
        at, found = insertion(plain, shown)
        assert plain[:at] + list(found) + plain[at:] == shown


def test_anything_but_an_insertion_is_refused():
    with pytest.raises(ValueError, match="worked example inserted"):
        insertion([1, 2, 3, 4], [1, 9, 3, 4, 5])  # 2 replaced, not kept
    with pytest.raises(ValueError):
        insertion([1, 2, 3], [1, 2])  # shorter


def _teacher(model, tokenizer, name: str = "similar"):
    spec = get_env("calculator_compound")
    return spec, PrivilegedTeacher(model, tokenizer, spec, {}, PRIVILEGED.get(name), "template", "train")


def test_the_teacher_reads_the_students_tokens_after_a_worked_example(tiny, tokenizer):
    """The student's episode (a demonstration in the rollout's token layout) as the teacher reads
    it equals the conversation rendered from messages with the example's exchange before the
    question (the example's own replies untrained); the teacher's log-probabilities at the trained
    positions equal a plain forward of that sequence, within 1e-4. The witness: the student's own
    log-probabilities (no example) are more than 1e-2 away."""
    spec, teacher = _teacher(tiny, tokenizer)
    task = spec.tasks("train", 40, 3)[-1]
    messages, student = demonstrate(spec, {}, task, tokenizer)
    example = PRIVILEGED.get("similar")(task, teacher.kin(task))
    env = spec.make_env({})
    shown_msgs = [{"role": "user", "content": example.prompt}, *[{**m, "weight": 0} if m["role"] == "assistant" else m
                                                                   for m in spec.demonstration(example, env)]]
    prompt = env.reset(task)
    expected = conversation_trajectory(task, [prompt[0], *shown_msgs, *prompt[1:], *messages], env.tool_schemas,
                                       env.format, tokenizer)
    row = teacher.row(student)
    assert row.token_ids() == expected.token_ids()
    assert row.loss_mask() == expected.loss_mask()

    batch = make_batch([student], tokenizer.pad_token_id)
    got = teacher.logprobs(SimpleNamespace(rows=[student], batch=batch, task=task), "fp32", 1.0)
    ids = torch.tensor([row.token_ids()])
    with torch.no_grad():
        logits = tiny(input_ids=ids).logits[0].float()
    at = [i for i, m in enumerate(row.loss_mask()) if m]
    plain = torch.log_softmax(logits[[i - 1 for i in at]], -1)
    assert torch.allclose(got, plain, atol=1e-4)
    with torch.no_grad():
        own = torch.log_softmax(tiny(input_ids=torch.tensor([student.token_ids()])).logits[0].float(), -1)
    own_at = own[[i - 1 for i, m in enumerate(student.loss_mask()) if m]]
    assert (own_at - got).abs().max() > 1e-2


def test_similar_shows_another_task_of_the_same_kind_and_solution_the_task_itself(tiny, tokenizer):
    spec, similar = _teacher(tiny, tokenizer, "similar")
    _, solution = _teacher(tiny, tokenizer, "solution")
    for task in spec.tasks("train", 12, 5):
        shown = tokenizer.decode(similar.prompt(task))
        kin = [k for k in similar.kin(task) if k.prompt != task.prompt]
        assert kin and kin[0].prompt in shown and shown.count(task.prompt) == 1
        assert str(kin[0].answer) in shown
        assert all(k.meta["template"] == task.meta["template"] for k in kin)
        assert tokenizer.decode(solution.prompt(task)).count(task.prompt) == 2


def test_the_recipe_checks_refuse_a_privileged_teacher_that_cannot_be():
    for extra, message in ((["distill.privileged=nearby"], "unknown privileged context"),
                           (["distill.privileged=similar", "distill.teachers=[recipes,recipes]"], "one teacher"),
                           (["distill.privileged=similar", "model.parallel=fsdp"], "privileged self-teacher")):
        with pytest.raises(ConfigError, match=message):
            check_config(load_config("recipes/tiny.yaml", extra))
    check_config(load_config("recipes/tiny.yaml", ["distill.privileged=similar", "distill.only=true"]))


def test_one_model_in_distill_teachers_is_the_frozen_privileged_teacher(tiny, tokenizer, tmp_path):
    """With `distill.teachers: [path]`, the example is shown to that model, frozen, not to the
    policy: its log-probabilities on the student's micro-batch equal a plain forward of the saved
    model on the privileged row (within 1e-4), and stay so after the policy's weights change. The
    witness: the policy shown the same example is more than 1e-2 away."""
    frozen = tiny_model(tokenizer, seed=7)
    frozen.save_pretrained(tmp_path / "sft")
    tokenizer.save_pretrained(tmp_path / "sft")
    cfg = load_config("recipes/tiny.yaml", ["env.name=calculator_compound", "distill.privileged=similar",
                                            f"distill.teachers=[{tmp_path / 'sft'}]"])
    check_config(cfg)
    assert load_teachers(cfg.distill, tokenizer, torch.device("cpu")) is None  # the model is the privileged one's
    spec = get_env("calculator_compound")
    teacher = privileged_teacher(cfg, tiny, tokenizer, spec)
    task = spec.tasks("train", 40, 3)[-1]
    _, student = demonstrate(spec, {}, task, tokenizer)
    mb = SimpleNamespace(rows=[student], batch=make_batch([student], tokenizer.pad_token_id), task=task)
    row = teacher.row(student)
    at = [i - 1 for i, m in enumerate(row.loss_mask()) if m]
    with torch.no_grad():
        plain = torch.log_softmax(frozen(input_ids=torch.tensor([row.token_ids()])).logits[0, at].float(), -1)
        assert torch.allclose(teacher.logprobs(mb, "fp32", 1.0), plain, atol=1e-4)
        for p in tiny.parameters():
            p.add_(0.05)
        assert torch.allclose(teacher.logprobs(mb, "fp32", 1.0), plain, atol=1e-4)
        for p in tiny.parameters():
            p.sub_(0.05)
    policy = PrivilegedTeacher(tiny, tokenizer, spec, {}, PRIVILEGED.get("similar"), "template", "train")
    assert (policy.logprobs(mb, "fp32", 1.0) - plain).abs().max() > 1e-2


def test_the_tiny_recipe_trains_with_a_privileged_self_teacher(tmp_path):
    """Every group trains under the teacher, also those StarPO-S's filter leaves out of the policy
    gradient (with variance_keep 0.5, half of them): the teacher's signal is what an unsolved group
    has. (Before, the filter dropped them: groups_trained was at most half.)"""
    cfg = load_config("recipes/tiny.yaml", [f"output_dir={tmp_path}", "eval.baselines=false", "sft.examples=0",
                                            "distill.privileged=similar", "eval.tasks_per_split=2",
                                            "rl.filters.variance_keep=0.5"])
    loop.train(cfg)
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    rl = [r for r in rows if r["stage"] == "rl"]
    assert len(rl) == 2 and all(r["opd_kl"] > 0 for r in rl)
    assert [r["groups_trained"] for r in rl] == [cfg.rl.tasks.per_step] * 2


def test_with_unadvantaged_keeps_the_trained_credit_and_zeroes_the_rest(make_group):
    gen = torch.Generator().manual_seed(0)
    every = [make_group(i, [0.0, 1.0], gen) for i in range(3)]
    trained = [every[2], every[0]]
    credit = Credit([torch.full((len(t.token_ids()),), float(k + 1)) for k, t in
                     enumerate(t for g in trained for t in g.trajectories)])
    groups, out = with_unadvantaged(every, trained, credit)
    assert groups == every
    firsts = [float(a[0]) for a in out.advantages]
    assert firsts == [3.0, 4.0, 0.0, 0.0, 1.0, 2.0]  # every[0] had rows 3, 4 of the credit; every[1] none
    assert [len(a) for a in out.advantages] == [len(t.token_ids()) for g in every for t in g.trajectories]
