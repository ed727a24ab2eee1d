"""The teachers of on-policy distillation: loaded once, frozen, scoring the student's batches.

Teachers must share the student's tokenizer (they read the student's token ids): checked when they
load, with a clear error. They are forwarded one after the other on each micro-batch (never all
activations at once), and a task can be routed to a subset of them by one of its meta fields
(`distill.route_key`, `distill.routes`: value -> teacher index); other tasks get the merge of all.
"""

from __future__ import annotations

import torch

from agentic_rl.algorithms.distill import merge_teachers
from agentic_rl.engines.precision import autocast
from agentic_rl.trainer.config import Config
from agentic_rl.trainer.forward import policy_forward
from agentic_rl.types import Batch, Task


class Teachers:
    def __init__(self, models: list, weights: list[float], merge: str, route_key: str = "",
                 routes: dict[str, int] | None = None):
        self.models, self.weights, self.merge = models, weights, merge
        self.route_key, self.routes = route_key, dict(routes or {})

    def chosen(self, task: Task) -> list[int]:
        if self.route_key:
            value = task.meta.get(self.route_key, task.id)
            if str(value) in self.routes:
                return [self.routes[str(value)]]
        return list(range(len(self.models)))

    @torch.no_grad()
    def logprobs(self, task: Task, batch: Batch, cfg: Config) -> torch.Tensor:
        """(N, V) log-probabilities of the (merged) teacher at the batch's N trained positions."""
        picked = self.chosen(task)
        lps = []
        for i in picked:  # one teacher at a time: only one set of activations alive
            with autocast(cfg.model.precision):
                lps.append(policy_forward(self.models[i], batch, cfg.rollout.temperature, full=True).full)
        return merge_teachers(lps, [self.weights[i] for i in picked], self.merge)


def _frozen(name: str, tokenizer, key: str, why: str):
    from agentic_rl.models.loader import load_model

    try:
        model, teacher_tokenizer = load_model(name)
    except FileNotFoundError as e:
        raise FileNotFoundError(f"{key}: {e}".replace("model.name: ", "")) from None
    if teacher_tokenizer.get_vocab() != tokenizer.get_vocab():
        raise ValueError(f"{key}: {name!r} does not share the student's tokenizer; {why}")
    model.requires_grad_(False)
    return model.eval()


def load_teachers(cfg: Config, tokenizer) -> Teachers | None:
    d = cfg.distill
    if not d.teachers:
        return None
    why = "on-policy distillation compares distributions over the same token ids"
    models = [_frozen(name, tokenizer, "distill.teachers", why) for name in d.teachers]
    weights = list(d.weights) or [1.0] * len(models)
    return Teachers(models, weights, d.merge, d.route_key, d.routes)


def hindsight_teacher(cfg: Config, tokenizer):
    """The engine that writes hindsight corrections, when it is not the policy itself."""
    if not (cfg.hindsight.coef > 0 and cfg.hindsight.teacher):
        return None
    from agentic_rl.engines.hf import HFEngine

    why = "its corrections are trained on as the student's own tokens"
    return HFEngine(_frozen(cfg.hindsight.teacher, tokenizer, "hindsight.teacher", why), tokenizer, cfg.model.precision)
