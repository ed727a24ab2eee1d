"""On-policy distillation through the trainer: the student moves towards a teacher, the teacher
must share the tokenizer, routing picks the teacher, and the tiny recipe runs OPD end to end."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
import torch

from agentic_rl.models.forward import policy_forward
from agentic_rl.models.loader import load_model, tiny_model
from agentic_rl.trainer.batching import make_batch
from agentic_rl.trainer.config import load_config
from agentic_rl.trainer.teachers import Teachers, load_teachers
from agentic_rl.types import Task
from tests.helpers import update


def _peaked_teacher(tokenizer):
    """A different random model with sharpened logits: far from the near-uniform student."""
    teacher = tiny_model(tokenizer, seed=7)
    with torch.no_grad():
        teacher.get_output_embeddings().weight.mul_(30.0)
    return teacher.eval().requires_grad_(False)


def _kl(student, teacher, groups, cfg, forward: bool = False) -> float:
    """Exact reverse KL(student || teacher) (or forward KL(teacher || student)) per trained token."""
    total, n = 0.0, 0
    with torch.no_grad():
        for g in groups:
            batch = make_batch(g.trajectories, 0)
            s = policy_forward(student, batch, full=True).full
            t = policy_forward(teacher, batch, full=True).full
            total += float((t.exp() * (t - s)).sum() if forward else (s.exp() * (s - t)).sum())
            n += s.shape[0]
    return total / n


def _flat_batch(tokenizer, make_group):
    """A peaked teacher and two groups whose rewards are all equal: no policy-gradient signal, so
    only the distillation term moves the student."""
    teacher = _peaked_teacher(tokenizer)
    gen = torch.Generator().manual_seed(0)
    groups = [make_group(i, [0.0] * 4, gen) for i in range(2)]
    advantages = [torch.zeros(len(t.token_ids())) for g in groups for t in g.trajectories]
    return teacher, Teachers([teacher], [1.0], "logits"), groups, advantages


def test_opd_alone_moves_the_student_towards_the_teacher(tiny, tokenizer, make_group):
    """Rewards all equal (no policy-gradient signal at all), OPD alone with the full-vocabulary loss:
    each update must lower the exact reverse KL on the batch. (The top-k and sampled estimators are
    checked against the full loss in tests/algorithms/test_distill.py; with a near-uniform random
    student over 49k tokens their one-sample and top-64 views of a peaked teacher are too weak to
    show a decrease in four steps, which is the regime's nature, not a bug.)"""
    cfg = load_config(None, ["rl.optim.lr=2e-3", "distill.teachers=[in-memory]", "distill.only=true"])
    teacher, teachers, groups, advantages = _flat_batch(tokenizer, make_group)
    opt = torch.optim.AdamW(tiny.parameters(), lr=2e-3)
    kls = [_kl(tiny, teacher, groups, cfg)]
    for _ in range(4):
        m = update(tiny, opt, groups, cfg, 0, advantages, models={"teachers": teachers})
        kls.append(_kl(tiny, teacher, groups, cfg))
    assert m["optimizer_steps"] == 1 and m["opd_kl"] > 0
    assert all(b < a for a, b in zip(kls, kls[1:])), kls


def test_forward_kl_opd_lowers_the_forward_kl_and_reports_the_reverse(tiny, tokenizer, make_group):
    """`distill.loss: forward` minimizes KL(teacher || student) on the student's samples: the update
    is a descent direction, so a small plain gradient step lowers it at every update, and the logged
    `opd_kl` is the exact reverse KL of the batch before the update. (SGD, not Adam, whose first step
    moves every weight by lr whatever the gradient; and a small step: the tiny model's tied 49k-token
    embedding is steep along the forward gradient, which spreads over the whole vocabulary, and
    steps of 0.05 or more overshoot.)"""
    cfg = load_config(None, ["distill.teachers=[in-memory]", "distill.only=true", "distill.loss=forward"])
    teacher, teachers, groups, advantages = _flat_batch(tokenizer, make_group)
    opt = torch.optim.SGD(tiny.parameters(), lr=5e-3)
    fwd = [_kl(tiny, teacher, groups, cfg, forward=True)]
    for _ in range(3):
        reverse_before = _kl(tiny, teacher, groups, cfg)
        m = update(tiny, opt, groups, cfg, 0, advantages, models={"teachers": teachers})
        assert m["opd_kl"] == pytest.approx(reverse_before, rel=1e-3)
        fwd.append(_kl(tiny, teacher, groups, cfg, forward=True))
    assert all(b < a for a, b in zip(fwd, fwd[1:])), fwd


def test_topk_over_the_whole_vocabulary_updates_exactly_like_full(tokenizer, make_group):
    gen = torch.Generator().manual_seed(0)
    groups = [make_group(0, [0.0] * 4, gen)]
    advantages = [torch.zeros(len(t.token_ids())) for t in groups[0].trajectories]
    teachers = Teachers([_peaked_teacher(tokenizer)], [1.0], "logits")
    params = []
    for loss in ("full", "topk"):
        cfg = load_config(None, ["rl.optim.lr=1e-3", "distill.teachers=[in-memory]", "distill.only=true",
                                 f"distill.loss={loss}", f"distill.topk={len(tokenizer)}"])
        student = tiny_model(tokenizer, seed=0)
        update(student, torch.optim.AdamW(student.parameters(), lr=1e-3), groups, cfg, 0, advantages,
               models={"teachers": teachers})
        params.append(torch.cat([p.detach().flatten() for p in student.parameters()]))
    assert torch.allclose(params[0], params[1], atol=1e-6)


def test_routing_sends_a_task_to_its_teacher(tokenizer):
    teachers = Teachers([object(), object()], [1.0, 1.0], "logits", "template", {"add": 0, "mul": 1})
    assert teachers.chosen(Task("a", "p", meta={"template": "mul"})) == [1]
    assert teachers.chosen(Task("b", "p", meta={"template": "div"})) == [0, 1]


def test_a_teacher_with_another_tokenizer_is_refused(tmp_path, tokenizer, monkeypatch):
    from agentic_rl.models import loader

    other = type(tokenizer).from_pretrained(loader.smollm2_dir())
    other.add_tokens(["<extra-token>"])
    monkeypatch.setattr(loader, "load_model", lambda name, device: (tiny_model(tokenizer, seed=1), other))
    cfg = load_config(None, ["distill.teachers=[x]"])
    with pytest.raises(ValueError, match="does not share the student's tokenizer"):
        load_teachers(cfg.distill, tokenizer, torch.device("cpu"))


def test_the_tiny_recipe_runs_opd(tmp_path, tokenizer):
    """End to end: a saved teacher directory, OPD plus GRPO, opd_kl logged every step."""
    from agentic_rl.trainer import loop

    teacher_dir = tmp_path / "teacher"
    _peaked_teacher(tokenizer).save_pretrained(teacher_dir)
    tokenizer.save_pretrained(teacher_dir)
    cfg = load_config("recipes/tiny.yaml", [f"output_dir={tmp_path / 'run'}", "sft.examples=0", "eval.baselines=false",
                                            "eval.tasks_per_split=2", f"distill.teachers=[{teacher_dir}]"])
    loop.train(cfg)
    rows = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    rl = [r for r in rows if r["stage"] == "rl"]
    assert len(rl) == 2 and all(r["opd_kl"] > 0 and r["optimizer_steps"] == 1 for r in rl)


def _adapter(base_dir, out_dir, seed: int):
    """A LoRA adapter on the saved base with random (non-identity) B matrices, saved as PEFT does."""
    from peft import LoraConfig, get_peft_model

    model, _ = load_model(str(base_dir))
    peft = get_peft_model(model, LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"]))
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in peft.named_parameters():
            if "lora_B" in name:
                p.copy_(torch.randn(p.shape, generator=gen) * 0.5)
    peft.save_pretrained(out_dir)
    return peft.merge_and_unload().eval()


def _picking(teacher: str, batch) -> SimpleNamespace:
    """A micro-batch (what a teacher reads of `loss_terms.MicroBatch`) routed by meta "pick"."""
    return SimpleNamespace(task=Task("t", "p", meta={"pick": teacher}), batch=batch)


def test_adapter_teachers_share_one_base_and_score_as_their_merged_models(tmp_path, tokenizer, make_group):
    """Two LoRA-adapter teachers on one base: the base is loaded once (both teachers hold the same
    module), and each teacher's log-probabilities equal those of its adapter merged into a full copy
    of the base, so sharing changes memory, not the signal."""
    base_dir = tmp_path / "base"
    tiny_model(tokenizer, seed=3).save_pretrained(base_dir)
    tokenizer.save_pretrained(base_dir)
    merged = [_adapter(base_dir, tmp_path / f"adapter{i}", seed=i) for i in range(2)]
    cfg = load_config(None, ["model.precision=fp32",  # the reference below runs in fp32 too
                             f"distill.teachers=[{tmp_path / 'adapter0'}, {tmp_path / 'adapter1'}]"])
    teachers = load_teachers(cfg.distill, tokenizer, torch.device("cpu"))
    assert teachers.models[0].shared is teachers.models[1].shared
    assert not any(p.requires_grad for p in teachers.models[0].shared.parameters())
    batch = make_batch(make_group(0, [0.0], torch.Generator().manual_seed(0)).trajectories, 0)
    for i, reference in enumerate(merged):
        routed = Teachers(teachers.models, [1.0, 1.0], "logits", "pick", {"a": 0, "b": 1})
        got = routed.logprobs(_picking("ab"[i], batch), cfg.model.precision, cfg.rollout.temperature)
        want = policy_forward(reference, batch, cfg.rollout.temperature, full=True).full
        assert torch.allclose(got, want, atol=1e-5), (i, (got - want).abs().max())
    first = routed.logprobs(_picking("a", batch), cfg.model.precision, cfg.rollout.temperature)
    second = routed.logprobs(_picking("b", batch), cfg.model.precision, cfg.rollout.temperature)
    assert (first - second).abs().max() > 1e-3  # the adapters differ, so the switch is real
