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
Tolerances (`rollout.engine.sync_probe_tol`, 0 = by the sampler's dtype): 1e-3 when the sampler computes
in fp32 like the trainer, 0.1 nats a token when it computes in bf16 — what the check catches is a
sampler whose distribution left the trainer's by more than that; a sync skipped after one small
update (which moves the distribution by less than bf16's own noise) is within it.

So where the engine can report a checksum of the weights it samples from, the probe compares it,
too, with the same checksum of the trainer's weights cast to the sampler's dtype (`weights_checksum`:
crc32 of every tensor's bytes, name by name): equal only when every weight the sampler holds is
the trainer's, rounded as a correct sync rounds it. One optimizer step at the recipes' learning rate
(1e-5) moves a weight by about 1e-5, under bf16's spacing (1.2e-4 at 0.02) for most weights, yet
rounds many to the next bf16 value (a quarter of the tiny model's): the checksum changes, the gap
barely does.
The in-process engine reports one (`HFEngine.weights_checksum`) when it samples from a copy of the
weights (in fp32 without a copy it reads the policy itself: nothing can go stale); so does our
server (`GET /weights/checksum`).

An engine without a checksum that can score a prompt (vLLM through `prompt_logprobs`; the
in-process engine of a LoRA policy, whose sampler holds a merge the trainer does not) must instead
follow the trainer's update (`SyncProbe.moved`): between two checks the sampler's logprobs of the
probe's ~300 prompt tokens must move at least half of the way the trainer's moved, projected on the
trainer's move (a stale sampler moves 0, a synced one 0.97 on SmolLM2 in bf16 after one update at lr
1e-5). Prompt logprobs need every position's logits, which a prefix cache (keys and values) does
not hold, so this measures the weights. Ray workers are checked by the gap alone.

The prefix-cache reset after a vLLM update verifies nothing by its answer: vLLM answers
`/reset_prefix_cache` 200 with an empty body, so the retry in `weight_update._reset_prefix_cache`
(on `success: false`) never runs. A cache the reset left stale shows only in the greedy gap, which
is answered from it: after an update that moved the distribution past the tolerance, not after one
small update.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field

import torch

from agentic_rl.engines import weight_update
from agentic_rl.engines.base import SamplingParams
from agentic_rl.faults import InfrastructureError
from agentic_rl.models import sharding
from agentic_rl.models.device import device_of
from agentic_rl.models.forward import sequence_logprobs
from agentic_rl.models.lora import is_lora
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
FOLLOWED = 0.5  # the least share of the trainer's move on the prompt a synced sampler's must follow


class WeightSyncError(InfrastructureError):
    """The sampler does not serve the trainer's weights after a sync."""

    kind = "weight_sync"


@dataclass(frozen=True)
class SyncProbe:
    prompt: tuple[int, ...]
    tolerance: float
    precision: str  # the trainer's (its forward runs under the same autocast as training)
    # the previous check's prompt logprobs, the sampler's and the trainer's (`moved`), for an engine
    # that reports no weight checksum; filled by `check`
    previous: dict[str, torch.Tensor] = field(default_factory=dict, compare=False, repr=False)

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
        with autocast(self.precision, device_of(model)):
            trained = _trainer_logprobs(model, (*self.prompt, *sample.ids))
        return float((served - trained[len(self.prompt) - 1 :]).abs().mean())

    def check(self, engine, model) -> float:
        """The gap after the engine's latest sync; raises `WeightSyncError` past the tolerance, when
        the sampler's weight checksum is not the trainer's, or (an engine without one) when the
        sampler did not follow the trainer's last update."""
        gap = self.gap(engine, model)
        if not gap <= self.tolerance:  # a NaN fails too
            raise WeightSyncError(
                f"weight sync to version {engine.version} failed its probe: the sampler's logprobs of its greedy "
                f"continuation of a fixed prompt differ from the trainer's by {gap:.4f} nats a token (tolerance "
                f"{self.tolerance:g}); the sampler is not serving the trained weights (a sync skipped, half "
                "written, cast to the wrong dtype, or answered from a stale cache)")
        sums = checksums(engine, model)
        if sums is not None and sums[0] != sums[1]:
            raise WeightSyncError(
                f"weight sync to version {engine.version} failed its probe: the weights the sampler holds (crc32 "
                f"{sums[0]}) are not the trainer's in {str(engine.dtype).removeprefix('torch.')} (crc32 {sums[1]}), "
                f"though its logprobs are within {gap:.4f} nats a token of the trainer's (tolerance "
                f"{self.tolerance:g}); the sampler is not serving the trained weights (a sync skipped or half "
                "written after an update too small for the logprobs to show)")
        moved = self.moved(engine, model) if sums is None else None
        if moved is not None and not moved >= FOLLOWED:
            raise WeightSyncError(
                f"weight sync to version {engine.version} failed its probe: since the previous sync the sampler's "
                f"logprobs of the probe's prompt moved {moved:.2f} of the way the trainer's did (at least "
                f"{FOLLOWED:g} expected), though its greedy logprobs are within {gap:.4f} nats a token of the "
                f"trainer's (tolerance {self.tolerance:g}); the sampler is still on the weights before the update "
                "(a sync skipped, or answered from a stale cache)")
        return gap

    def moved(self, engine, model) -> float | None:
        """How far the sampler's prompt logprobs moved since the previous check along the trainer's
        own move, as a share of it (1: followed, 0: stayed). The trainer's are read in fp32 whatever
        the training precision: under bf16 autocast their own rounding moved SmolLM2's 0.063 nats a
        token (rms) where one update at lr 1e-5 moved them 0.013, and a synced sampler then measured
        0.07 of the way (fp32: 0.97; stale: 0.00). None on the first check, for an engine
        that cannot score a prompt, or when the trainer moved less than `tolerance / 10` nats a token
        (rms): too little for bf16's rounding to follow (a synced tiny model followed 0.64-1.15 of a
        2-3e-4 move, -0.09 to 5.96 of a 2-3e-5 one, 1.00 of a 0.02 one); None for an engine that
        samples from the policy itself. Remembers this check for the next."""
        served = None if getattr(engine, "samples_policy", False) else prompt_logprobs(engine, self.prompt)
        if served is None:
            return None
        trained = _trainer_logprobs(model, self.prompt)
        before = dict(self.previous)
        self.previous.update(served=served, trained=trained)
        if not before or before["served"].shape != served.shape:
            return None
        d_trained, d_served = trained - before["trained"], served - before["served"]
        if float(d_trained.pow(2).mean().sqrt()) < self.tolerance / 10:
            return None
        return float(d_served @ d_trained / (d_trained @ d_trained))


@torch.no_grad()
def _trainer_logprobs(model, ids) -> torch.Tensor:
    """The trainer's fp32 logprobs of `ids` (a collective when sharded), in eval mode."""
    training = model.training
    model.eval()
    out = sharding.call(model, sequence_logprobs, tuple(ids)).float().cpu()
    model.train(training)
    return out


@torch.no_grad()
def prompt_logprobs(engine, prompt: tuple[int, ...]) -> torch.Tensor | None:
    """(T - 1,) the sampler's fp32 logprobs of the prompt's tokens at temperature 1: the in-process
    engine's `score`, a served engine's `prompt_logprobs` (ours and vLLM's); None for another engine."""
    if hasattr(engine, "score"):
        return engine.score(list(prompt)).float().cpu()
    if not hasattr(engine, "_post"):
        return None
    body = {"prompt": list(prompt), "max_tokens": 1, "temperature": 0.0, "prompt_logprobs": 0}
    if getattr(engine, "served_model", None):
        body["model"] = engine.served_model
    entries = engine._post("/v1/completions", body)["choices"][0]["prompt_logprobs"][1:]
    return torch.tensor([e[str(t)]["logprob"] for t, e in zip(prompt[1:], entries)], dtype=torch.float32)


def weights_checksum(named: Iterable[tuple[str, torch.Tensor]], dtype: torch.dtype) -> str:
    """crc32 of the tensors' bytes in `dtype`, name by name in name order: equal only for weights
    equal bit for bit (a cast rounds to nearest, as a sync's copy into a `dtype` copy does)."""
    crc = 0
    for name, t in sorted(named, key=lambda item: item[0]):
        crc = zlib.crc32(name.encode(), crc)
        # a copy: a tensor whose storage numpy has seen can never be resized, and FSDP2 frees the
        # storage of its unsharded parameters by resizing it
        crc = zlib.crc32(t.detach().to(dtype=dtype, device="cpu", copy=True).contiguous().view(torch.uint8).numpy(), crc)
    return f"{crc:08x}"


def checksums(engine, model) -> tuple[str, str] | None:
    """(the sampler's weight checksum, the trainer's cast to the sampler's dtype), or None where the
    engine reports none (and for a LoRA policy: its sampler holds a merge). A collective when sharded."""
    served = None if is_lora(model) or getattr(engine, "samples_policy", False) else _sampler_checksum(engine)
    if served is None:
        return None
    return served, weights_checksum(sharding.full_parameters(model).items(), engine.dtype)


def _sampler_checksum(engine) -> str | None:
    report = getattr(engine, "weights_checksum", None)  # in process
    if report is not None:
        return report()
    if getattr(engine, "writer", None) is weight_update.load_weights:  # a served engine on our server
        return str(engine._get("/weights/checksum")["checksum"])
    return None


def checked_sync(engine, model, probe: SyncProbe | None) -> tuple[int, float | None]:
    """`engine.sync_weights()`, then the probe: (the new version, the measured gap or None)."""
    version = engine.sync_weights()
    return version, (probe.check(engine, model) if probe is not None else None)
