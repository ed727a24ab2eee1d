"""The teachers of on-policy distillation: loaded once, frozen, scoring the student's batches.

Teachers must share the student's tokenizer (they read the student's token ids): checked when they
load, with a clear error. They are forwarded one after the other on each micro-batch (never all
activations at once), and a task can be routed to a subset of them by one of its meta fields
(`distill.route_key`, `distill.routes`: value -> teacher index); other tasks get the merge of all.

A teacher given as a PEFT LoRA adapter directory (one with `adapter_config.json`) is loaded onto its
base model, and every adapter teacher with the same base shares one copy of it: N domain teachers
cost one base plus N adapters, the teacher switched by `set_adapter` before its forward pass.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from agentic_rl.algorithms.distill import merge_teachers
from agentic_rl.errors import UserFileError
from agentic_rl.models.forward import policy_forward
from agentic_rl.models.precision import autocast
from agentic_rl.rollout.hindsight import DEMONSTRATION_TEACHER
from agentic_rl.trainer.config import DistillConfig, HindsightConfig
from agentic_rl.types import Task


class AdapterTeacher:
    """One LoRA adapter of a base shared with other teachers; active only for its own forward pass."""

    def __init__(self, shared, name: str):
        self.shared, self.name = shared, name

    def activate(self):
        self.shared.set_adapter(self.name)
        return self.shared


class Teachers:
    def __init__(self, models: list, weights: list[float], merge: str, route_key: str = "",
                 routes: dict[str, int] | None = None):
        """`models`: full models, or `AdapterTeacher`s over a shared base."""
        self.models, self.weights, self.merge = models, weights, merge
        self.route_key, self.routes = route_key, dict(routes or {})

    def chosen(self, task: Task) -> list[int]:
        if self.route_key:
            value = task.meta.get(self.route_key, task.id)
            if str(value) in self.routes:
                return [self.routes[str(value)]]
        return list(range(len(self.models)))

    @torch.no_grad()
    def logprobs(self, mb, precision: str, temperature: float) -> torch.Tensor:
        """(N, V) log-probabilities of the (merged) teacher at the N trained positions of the
        micro-batch `mb` (`loss_terms.MicroBatch`)."""
        batch = mb.batch
        picked = self.chosen(mb.task)
        lps = []
        for i in picked:  # one teacher at a time: only one set of activations alive
            teacher = self.models[i]
            model = teacher.activate() if isinstance(teacher, AdapterTeacher) else teacher
            with autocast(precision, batch.input_ids.device):
                lps.append(policy_forward(model, batch, temperature, full=True).full)
        return merge_teachers(lps, [self.weights[i] for i in picked], self.merge)


def _frozen(name: str, tokenizer, key: str, why: str, device: torch.device):
    from agentic_rl.models.loader import load_model

    try:
        model, teacher_tokenizer = load_model(name, device=device)
    except FileNotFoundError as e:
        raise UserFileError(f"{key}: {e}".replace("model.name: ", "")) from None
    if teacher_tokenizer.get_vocab() != tokenizer.get_vocab():
        raise ValueError(f"{key}: {name!r} does not share the student's tokenizer; {why}")
    model.requires_grad_(False)
    return model.eval()


def adapter_base(path: str) -> str | None:
    """The base model of a PEFT adapter directory, or None when `path` is not one."""
    config = Path(path) / "adapter_config.json"
    if not config.is_file():
        return None
    base = json.loads(config.read_text()).get("base_model_name_or_path")
    if not base:
        raise ValueError(f"distill.teachers: {path} is a LoRA adapter without base_model_name_or_path")
    return base


def _load_all(names: list[str], tokenizer, why: str, device: torch.device) -> list:
    """Full models load alone; adapters load onto one shared frozen copy of their base each."""
    from peft import PeftModel

    shared: dict[str, object] = {}
    models = []
    for i, name in enumerate(names):
        base = adapter_base(name)
        if base is None:
            models.append(_frozen(name, tokenizer, "distill.teachers", why, device))
            continue
        adapter = f"teacher{i}"
        if base not in shared:
            shared[base] = PeftModel.from_pretrained(_frozen(base, tokenizer, "distill.teachers (adapter base)", why, device),
                                                     name, adapter_name=adapter)
        else:
            shared[base].load_adapter(name, adapter_name=adapter)
        shared[base].requires_grad_(False)
        models.append(AdapterTeacher(shared[base].eval(), adapter))
    return models


SAME_IDS = "on-policy distillation compares distributions over the same token ids"


def load_frozen(name: str, tokenizer, device: torch.device):
    """One frozen model (a full model or a LoRA adapter over its base), ready to forward."""
    model = _load_all([name], tokenizer, SAME_IDS, device)[0]
    return model.activate() if isinstance(model, AdapterTeacher) else model


def load_teachers(d: DistillConfig, tokenizer, device: torch.device) -> Teachers | None:
    """The on-policy distillation teachers, frozen, on the student's `device`."""
    if not d.teachers or d.privileged:  # with privileged context, the one teacher is shown the example
        return None
    models = _load_all(list(d.teachers), tokenizer, SAME_IDS, device)
    weights = list(d.weights) or [1.0] * len(models)
    return Teachers(models, weights, d.merge, d.route_key, d.routes)


def hindsight_teacher(h: HindsightConfig, tokenizer, precision: str, device: torch.device):
    """The engine that writes hindsight corrections, when it is not the policy itself (on `device`)."""
    if not (h.coef > 0 and h.teacher) or h.teacher == DEMONSTRATION_TEACHER:
        return None
    from agentic_rl.engines.hf import HFEngine

    why = "its corrections are trained on as the student's own tokens"
    return HFEngine(_frozen(h.teacher, tokenizer, "hindsight.teacher", why, device), tokenizer, precision)
