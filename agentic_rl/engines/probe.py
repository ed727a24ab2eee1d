"""The check after every weight sync: does the sampler serve the trainer's weights?

A sync can "succeed" and leave the sampler on other weights — skipped, half written, cast to the
wrong dtype, or (a served engine) answering from a prefix cache computed by the old weights. After
each `sync_weights()`, the engine scores a fixed token sequence (`engine.score(ids)`: its logprobs
of each token given the ones before, temperature 1) and the trainer scores the same sequence with
its own forward; their mean absolute gap per token must stay within a tolerance, or the run stops
(`WeightSyncError`, naming the version).

The sequence is a short chat prompt and the sampler's own greedy continuation of it at the start
of the run: tokens the policy finds likely, on which a bf16 sampler and the fp32 trainer agree to a
few thousandths of a nat (on an arbitrary text they differ by about 0.05). The gap is measured on
the continuation. Tolerances (`rollout.sync_probe_tol`, 0 = by the sampler's dtype): 1e-3 when the
sampler computes in fp32 like the trainer, 0.1 nats a token when it computes in bf16 — what the
check catches is a sampler whose distribution left the trainer's by more than that; a sync skipped
after one small update (which moves the distribution by less than bf16's own noise) is within it.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from agentic_rl.engines.base import SamplingParams
from agentic_rl.faults import InfrastructureError
from agentic_rl.models.device import device_of
from agentic_rl.models.forward import sequence_logprobs
from agentic_rl.models.precision import autocast

PROBE_MESSAGES = [{"role": "user", "content": "Name three prime numbers and add them up."}]
PROBE_TOKENS = 24  # the continuation the gap is measured on
TOLERANCE = {torch.float32: 1e-3, torch.bfloat16: 0.1}


class WeightSyncError(InfrastructureError):
    """The sampler does not serve the trainer's weights after a sync."""

    kind = "weight_sync"


@dataclass(frozen=True)
class SyncProbe:
    ids: tuple[int, ...]
    start: int  # the continuation's first position: the gap is measured from here
    tolerance: float
    precision: str  # the trainer's (its forward runs under the same autocast as training)

    @classmethod
    def build(cls, engine, tokenizer, precision: str, tolerance: float = 0.0) -> SyncProbe:
        """The probe for `engine`: the prompt and the engine's greedy continuation of it."""
        text = tokenizer.apply_chat_template(PROBE_MESSAGES, add_generation_prompt=True, tokenize=False)
        prompt = list(tokenizer(text, add_special_tokens=False)["input_ids"])
        sample = engine.session(seed=0).generate({0: prompt}, SamplingParams(0.0, 1.0, PROBE_TOKENS))[0]
        tol = tolerance or TOLERANCE.get(getattr(engine, "dtype", torch.float32), 0.1)
        return cls((*prompt, *sample.ids), len(prompt), tol, precision)

    @torch.no_grad()
    def gap(self, engine, model) -> float:
        """Mean |sampler logprob - trainer logprob| per token of the continuation."""
        served = torch.as_tensor(engine.score(self.ids), dtype=torch.float32).cpu()
        training = model.training
        model.eval()
        with autocast(self.precision, device_of(model)):
            trained = sequence_logprobs(model, self.ids).cpu()
        model.train(training)
        return float((served - trained)[self.start - 1 :].abs().mean())

    def check(self, engine, model) -> float:
        """The gap after the engine's latest sync; raises `WeightSyncError` past the tolerance."""
        gap = self.gap(engine, model)
        if not gap <= self.tolerance:  # a NaN fails too
            raise WeightSyncError(
                f"weight sync to version {engine.version} failed its probe: the sampler's logprobs of a fixed "
                f"sequence differ from the trainer's by {gap:.4f} nats a token (tolerance {self.tolerance:g}); "
                "the sampler is not serving the trained weights (a sync skipped, half written, cast to the "
                "wrong dtype, or answered from a stale cache)")
        return gap


def checked_sync(engine, model, probe: SyncProbe | None) -> tuple[int, float | None]:
    """`engine.sync_weights()`, then the probe: (the new version, the measured gap or None)."""
    version = engine.sync_weights()
    return version, (probe.check(engine, model) if probe is not None else None)
