"""The check after every weight sync: does the sampler serve the trainer's weights?

A sync can "succeed" and leave the sampler on other weights — skipped, half written, cast to the
wrong dtype, or (a served engine) answering from a prefix cache computed by the old weights. After
each `sync_weights()` the engine decodes a fixed chat prompt greedily through the same route its
rollouts take (a session; a served engine's `/v1/completions`), returning the logprobs it computed
for each token it chose, and the trainer scores the same tokens with its own forward; their mean
absolute gap per token must stay within a tolerance, or the run stops (`WeightSyncError`, naming
the version). The prompt is cached by a served engine's prefix cache, so a cache the update did not
reset shows as a gap.

Greedy tokens are ones the policy finds likely, on which a bf16 sampler and the fp32 trainer agree
to a few thousandths of a nat (on an arbitrary text they differ by about 0.05). Both sides are the
distribution at temperature 1 (a greedy request's logprobs are, in our engine and in vLLM).
Tolerances (`rollout.sync_probe_tol`, 0 = by the sampler's dtype): 1e-3 when the sampler computes
in fp32 like the trainer, 0.1 nats a token when it computes in bf16 — what the check catches is a
sampler whose distribution left the trainer's by more than that; a sync skipped after one small
update (which moves the distribution by less than bf16's own noise) is within it.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from agentic_rl.engines.base import SamplingParams
from agentic_rl.faults import InfrastructureError
from agentic_rl.models import sharding
from agentic_rl.models.device import device_of
from agentic_rl.models.forward import sequence_logprobs
from agentic_rl.models.precision import autocast

# long enough (~300 tokens) to fill whole KV blocks of a served engine's prefix cache (vLLM's CPU
# blocks are 128 tokens): the probe's second call on a server reuses them, so a cache left over
# from the old weights shows in its gap
PROBE_SYSTEM = " ".join([
    "You are a careful assistant who answers questions about arithmetic, units and everyday facts.",
    "Think step by step, state each intermediate result, and check the final answer before giving it.",
    "When a question asks for a list, give exactly as many items as it asks for, in increasing order.",
    "When a question involves money, write amounts with two decimals; when it involves time, use hours",
    "and minutes; when it involves distances, use kilometres unless the question uses another unit.",
    "If a question is ambiguous, say which reading you chose and why, then answer that reading.",
    "Never invent data: if a fact is needed and not given, say that it is missing.",
    "Prefer short sentences. Avoid jargon. Do not repeat the question back to the user.",
    "A prime number is a whole number greater than one whose only divisors are one and itself;",
    "the first few are two, three, five, seven, eleven, thirteen, seventeen, nineteen and twenty-three.",
    "An even number greater than two is never prime. The sum of two odd numbers is even.",
    "Add numbers from left to right, carrying tens, and verify the total by adding in reverse order.",
    "Multiplication distributes over addition: three times (four plus five) is twelve plus fifteen.",
    "Percentages are parts of one hundred: twenty percent of fifty is ten.",
    "Finish with a line of the form 'Answer: <value>' and nothing after it."])
PROBE_MESSAGES = [{"role": "system", "content": PROBE_SYSTEM},
                  {"role": "user", "content": "Name three prime numbers and add them up."}]
PROBE_TOKENS = 24  # the continuation the gap is measured on
TOLERANCE = {torch.float32: 1e-3, torch.bfloat16: 0.1}


class WeightSyncError(InfrastructureError):
    """The sampler does not serve the trainer's weights after a sync."""

    kind = "weight_sync"


@dataclass(frozen=True)
class SyncProbe:
    prompt: tuple[int, ...]
    tolerance: float
    precision: str  # the trainer's (its forward runs under the same autocast as training)

    @classmethod
    def build(cls, engine, tokenizer, precision: str, tolerance: float = 0.0) -> SyncProbe:
        """The probe for `engine`: the chat prompt, and the tolerance its dtype calls for."""
        text = tokenizer.apply_chat_template(PROBE_MESSAGES, add_generation_prompt=True, tokenize=False)
        prompt = tuple(tokenizer(text, add_special_tokens=False)["input_ids"])
        tol = tolerance or TOLERANCE.get(getattr(engine, "dtype", torch.float32), 0.1)
        return cls(prompt, tol, precision)

    @torch.no_grad()
    def gap(self, engine, model) -> float:
        """Mean |sampler logprob - trainer logprob| per token of the engine's greedy continuation."""
        sample = engine.session(seed=0).generate({0: list(self.prompt)}, SamplingParams(0.0, 1.0, PROBE_TOKENS))[0]
        served = torch.tensor(sample.logprobs, dtype=torch.float32)
        training = model.training
        model.eval()
        with autocast(self.precision, device_of(model)):
            trained = sharding.call(model, sequence_logprobs, (*self.prompt, *sample.ids)).float().cpu()
        model.train(training)
        return float((served - trained[len(self.prompt) - 1 :]).abs().mean())

    def check(self, engine, model) -> float:
        """The gap after the engine's latest sync; raises `WeightSyncError` past the tolerance."""
        gap = self.gap(engine, model)
        if not gap <= self.tolerance:  # a NaN fails too
            raise WeightSyncError(
                f"weight sync to version {engine.version} failed its probe: the sampler's logprobs of its greedy "
                f"continuation of a fixed prompt differ from the trainer's by {gap:.4f} nats a token (tolerance "
                f"{self.tolerance:g}); the sampler is not serving the trained weights (a sync skipped, half "
                "written, cast to the wrong dtype, or answered from a stale cache)")
        return gap


def checked_sync(engine, model, probe: SyncProbe | None) -> tuple[int, float | None]:
    """`engine.sync_weights()`, then the probe: (the new version, the measured gap or None)."""
    version = engine.sync_weights()
    return version, (probe.check(engine, model) if probe is not None else None)
