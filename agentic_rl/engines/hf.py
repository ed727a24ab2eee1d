"""The embedded engine: transformers sampling batched across episodes, KV cache kept across turns.

One `HFSession` holds the KV cache of a batch of episodes. A turn appends only the new tokens (the
prompt on the first turn, an observation later); the cache is kept, so a new turn never
re-prefills the conversation so far, and rows move to their next turn without waiting for the
others. Rows of different lengths share one cache: padding may sit anywhere in a row (it is masked
and given no position), which lets rows receive observations of different lengths. Observations
go in a forward of the rows that receive them, so the rows still decoding are not padded to their
width, and the padding columns they leave are dropped from the cache once they are a quarter of
it (`kv_cache.py`). Identical prompts (the G samples of a group) are prefilled once and the cache
rows are copied; the prefix all prompts share (system prompt, tool schemas) is prefilled once and
kept once, read by every row through `prefix_attention`.

Sampling runs on a bf16 copy of the weights where bf16 is measured to be faster than fp32
(`models/precision.py`), and on the policy itself otherwise; `sync_weights` copies the trained
fp32 weights into it after each update. A LoRA policy's copy is a plain model with the adapters
merged in, re-merged at each sync.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from contextlib import nullcontext

import torch

from agentic_rl.engines.base import Restart, Sample, SamplingParams
from agentic_rl.engines.head import LastLogits
from agentic_rl.engines.kv_cache import GrowableCache
from agentic_rl.engines.prefix_attention import prefix_attention, reproduces_attention
from agentic_rl.models import sharding
from agentic_rl.models.device import device_of
from agentic_rl.models.forward import sequence_logprobs
from agentic_rl.models.kv import cache_kwarg, output_cache
from agentic_rl.models.lora import MergedWeights, is_lora, mergeable
from agentic_rl.models.precision import inference_dtype


class HFEngine:
    def __init__(self, model, tokenizer, precision: str = "auto", own_copy: bool = False):
        """`own_copy`: sample from a copy of the weights even in fp32 (rollouts that run while the
        policy trains, `rl.max_staleness` > 0, must not read weights mid-update)."""
        self.model = model
        self.tokenizer = tokenizer
        self.device = device_of(model)
        self.dtype = inference_dtype(precision, self.device)
        self._merged = None  # a LoRA policy's merge into its sampling copy
        if self.dtype == torch.float32 and not own_copy:  # no copy: fp32 sampling reads the policy itself
            self._infer = model
        elif is_lora(model) and mergeable(model):
            self._merged = MergedWeights(model)
            self._infer = copy.deepcopy(model).merge_and_unload().to(self.dtype)
        else:
            self._infer = copy.deepcopy(model).to(self.dtype)
        self._infer.eval()
        self.samples_policy = self._infer is model  # fp32 without a copy: its weights cannot go stale
        self.cache_kw = cache_kwarg(self._infer)  # once: the forward's signature never changes
        # Asked of the policy's own weights (fp32 as a rule): whether attention is plain softmax is
        # the architecture's property, and a bf16 copy's rounding, amplified through SmolLM2's
        # massive activations on the check's made-up tokens, turned it down on bf16 machines.
        self.shares_prefix = reproduces_attention(model, cache_kwarg(model))
        self.last_logits = LastLogits(self._infer)
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        self.eos_ids = eos_ids(tokenizer, model)
        self.version = 0
        self.narrow_feeds = True  # observations fed in forwards of their own rows (off: benchmarks' baseline)

    def sync_weights(self) -> int:
        """Copy the policy's weights into the sampling copy; returns the new weight version."""
        if self._merged is not None:
            self._merged.write(self._infer)
        elif self._infer is not self.model:
            with torch.no_grad():
                src = sharding.full_parameters(self.model)  # a collective when sharded
                for name, p in self._infer.named_parameters():
                    p.copy_(src[name])
        self.version += 1
        return self.version

    def weights_checksum(self) -> str:
        """The checksum of the weights it samples from, in its dtype (`probe.weights_checksum`)."""
        from agentic_rl.engines.probe import weights_checksum

        return weights_checksum(self._infer.named_parameters(), self.dtype)

    @torch.no_grad()
    def score(self, ids: Sequence[int]) -> torch.Tensor:
        """(T - 1,) fp32 log p(ids[t] | ids[:t]) for t >= 1 under the weights this engine samples
        from, at temperature 1 (what our server answers for `prompt_logprobs`)."""
        return sequence_logprobs(self._infer, ids)

    def session(self, seed: int = 0, row_seeds: Mapping[int, int] | None = None) -> HFSession:
        """`row_seeds`: a generator per row (episode), so a row's draws do not depend on which other
        rows share its batch (rollout.rng: episode); else one generator for the batch."""
        return HFSession(self, seed, row_seeds)


def eos_ids(tokenizer, model=None) -> frozenset[int]:
    """The ids that end a reply: the tokenizer's end of sequence and the model's generation config's
    (none without a model)."""
    ids = {tokenizer.eos_token_id}
    config = getattr(model, "generation_config", None)
    eos = config.eos_token_id if config is not None else None
    ids.update(eos if isinstance(eos, list) else [eos])
    return frozenset(i for i in ids if i is not None)


OnStop = Callable[[int, Sample], Sequence[int] | None]
OnToken = Callable[[int, int], None]  # (row, token id): each token as it is sampled


class HFSession:
    """The episodes of one rollout batch, decoded together until every episode is over.

    Turns do not wait for each other: when a row's action stops, `on_stop(row, sample)` runs at once
    (the env steps) and returns the observation ids to feed, or None when the episode is over. The
    next forward pass feeds that row its last sampled token plus the observation while the other
    rows go on decoding one token each (rows of a forward may carry chunks of different lengths).
    Rows whose episode ended are compacted out of the cache. A row whose context starts over (a
    `Restart`) leaves the batch and is prefilled from its new prompt once the others are done.
    """

    def __init__(self, engine: HFEngine, seed: int, row_seeds: Mapping[int, int] | None = None):
        self.engine = engine
        self.generator = torch.Generator().manual_seed(seed)  # on the host: the same draws on every device
        self.row_generators = ({r: torch.Generator().manual_seed(s) for r, s in row_seeds.items()}
                               if row_seeds is not None else None)
        self.device = engine.device
        self.rows: list[int] = []
        self.cache: GrowableCache | None = None
        self.mask = self._zeros(0, 0)  # (R, L): 1 where the cache holds a real token
        self.next_pos = self._zeros(0)  # (R,): position of each row's next token

    @torch.no_grad()
    def run(
        self,
        prompts: Mapping[int, Sequence[int]],
        params: SamplingParams,
        on_stop: OnStop,
        max_new: Callable[[int], int] | None = None,
        on_error: Callable[[int, str], None] | None = None,
        on_token: OnToken | None = None,
    ) -> None:
        """Decode every row's episode to its end. max_new(row): token limit of the row's next action.
        `on_token(row, id)`: each token as it is sampled, before the row's `on_stop` (the server's
        streamed replies). (`on_error` is never called: in-process, a failure is the whole batch's and
        raises.)"""
        limit = (lambda r: min(params.max_new_tokens, max_new(r))) if max_new else (lambda r: params.max_new_tokens)
        self.rows = sorted(prompts)
        logits = self._prefill_first(self.rows, [list(prompts[r]) for r in self.rows])
        state = {r: _Action(limit(r)) for r in self.rows}
        parked: dict[int, list[int]] = {}  # rows waiting to feed [last token, *observation]
        restarts: dict[int, list[int]] = {}  # rows whose context starts over, once the others are done
        while self.rows:
            tokens, lps = _sample(logits, params, self._generators(state, parked))
            for i, row in enumerate(self.rows):
                act = state.get(row)
                if act is None or row in parked:  # over, or waiting for its observation to be fed
                    continue
                tok = int(tokens[i])
                act.ids.append(tok)
                act.logprobs.append(float(lps[i]))
                if on_token is not None:
                    on_token(row, tok)
                reason = self._stop_reason(act.ids, params, act.limit)
                if reason is None:
                    continue
                text = self.engine.tokenizer.decode(act.ids, skip_special_tokens=False)
                nxt = on_stop(row, Sample(tuple(act.ids), tuple(act.logprobs), text, reason))
                if nxt is None or isinstance(nxt, Restart):
                    del state[row]
                    if nxt is not None:
                        restarts[row] = list(nxt)
                else:
                    parked[row] = [tok, *nxt]
                    state[row] = _Action(limit(row))
            if not state:
                break
            self._compact(state)
            logits = self._step(state, parked)
        if restarts:  # their new prompts prefill a fresh cache (the generators go on where they were)
            self.run(restarts, params, on_stop, max_new, on_error, on_token)

    def _generators(self, state: Mapping[int, _Action], parked: Mapping[int, list[int]]):
        """The batch's generator, or per row: a decoding row's own, None for a row whose sample is not
        used (over, or waiting for its observation), which then draws nothing."""
        if self.row_generators is None:
            return self.generator
        return [self.row_generators[r] if r in state and r not in parked else None for r in self.rows]

    def _step(self, state: Mapping[int, _Action], parked: dict[int, list[int]]) -> torch.Tensor:
        """One decode step: every live row feeds its last token; waiting rows get their observations
        once a quarter of the live rows wait (or all do). The observations go in a forward of their
        own rows, so the decoding rows are not padded to an observation's width."""
        flush = bool(parked) and (len(parked) * 4 >= len(state) or len(parked) == len(state))
        if not self.engine.narrow_feeds:  # one forward, every row padded to the widest chunk
            return self._append([(parked.pop(row) if flush else []) if row in parked else
                                 [state[row].ids[-1]] if row in state else [] for row in self.rows])
        fed = [i for i, row in enumerate(self.rows) if row in parked] if flush else []
        fed_index = self._index(fed)
        wide = self._append([parked.pop(self.rows[i]) for i in fed], fed_index) if fed else None
        waiting = set(parked) | {self.rows[i] for i in fed}
        decoding = [[state[row].ids[-1]] if row in state and row not in waiting else [] for row in self.rows]
        if not any(decoding):
            return wide.new_zeros(len(self.rows), wide.shape[-1]).index_copy_(0, fed_index, wide)
        logits = self._append(decoding)
        return logits.index_copy_(0, fed_index, wide) if fed else logits

    def _compact(self, state: Mapping[int, _Action]) -> None:
        """Drop the rows whose episode is over once they are a quarter of the batch."""
        keep = [i for i, r in enumerate(self.rows) if r in state]
        if len(keep) < len(self.rows) and (len(self.rows) - len(keep)) * 4 >= len(self.rows):
            self._select(self._index(keep))
            self.rows = [self.rows[i] for i in keep]

    def generate(self, prompts: Mapping[int, Sequence[int]], params: SamplingParams) -> dict[int, Sample]:
        """One action per row (single-turn use)."""
        out: dict[int, Sample] = {}

        def keep(row: int, sample: Sample) -> None:
            out[row] = sample

        self.run(prompts, params, keep)
        return out

    # ------------------------------------------------------------------ cache bookkeeping
    def _forward(self, ids, mask_new, positions, rows: torch.Tensor | None = None):
        """Forward `ids` for every row, or for `rows` only (mask_new and positions are theirs); the
        other rows get masked slots."""
        if rows is not None:
            full = self._zeros(self.mask.shape[0], mask_new.shape[1])
            full[rows] = mask_new
            mask_new = full
        self.mask = torch.cat([self.mask, mask_new], dim=1)
        shared = prefix_attention(self.engine._infer, self.cache) if self.cache.has_prefix else nullcontext()
        subset = self.cache.subset(rows) if rows is not None else nullcontext()
        with shared, subset:
            logits, out = self.engine.last_logits(
                input_ids=ids,
                attention_mask=self.mask if rows is None else self.mask[rows],
                position_ids=positions,
                use_cache=True,
                **{self.engine.cache_kw: self.cache},
            )
        self.cache = output_cache(out)
        self._repack()
        return logits

    def _repack(self) -> None:
        """Drop the cache's padding columns once they are a quarter of its width: each row's real
        slots move left (keys carry their positions, so attention over them is unchanged)."""
        if not self.engine.narrow_feeds:
            return
        width = self.mask.shape[1]
        real = int(self.mask.sum(1).max()) if width else 0
        if width - real < max(16, width // 4):
            return
        index = torch.sort((self.mask == 0).to(torch.int8), dim=1, stable=True).indices[:, :real]
        self.cache.repack(index)
        self.mask = self.mask.gather(1, index)

    def _prefill_first(self, rows: list[int], chunks: list[list[int]]) -> torch.Tensor:
        # Prefill each distinct prompt once and copy cache rows (the G samples of a group), and the
        # prefix all prompts share (system prompt, tool schemas, few-shot turns) once for all.
        uniq: dict[tuple[int, ...], int] = {}
        for c in chunks:
            uniq.setdefault(tuple(c), len(uniq))
        prompts = list(uniq)
        shared = _common_prefix(prompts) if len(prompts) > 1 else 0
        self.cache = GrowableCache()
        self.mask = self._zeros(1, 0)
        self.next_pos = self._zeros(1)
        if shared:
            self._append([list(prompts[0][:shared])])
            if self.engine.shares_prefix:  # kept once; each row's cache holds only its own tokens
                self.cache.freeze_prefix()
                self.mask = self._zeros(len(prompts), 0)
                self.next_pos = self._zeros(len(prompts)) + shared
            else:
                self._select(self._zeros(len(prompts)))
        else:
            self.mask = self._zeros(len(prompts), 0)
            self.next_pos = self._zeros(len(prompts))
        logits = self._append([list(p[shared:]) for p in prompts])
        index = self._index([uniq[tuple(c)] for c in chunks])
        self._select(index)
        self.rows = rows
        return logits[index]

    def _select(self, index: torch.Tensor) -> None:
        self.cache.batch_select_indices(index)
        self.mask = self.mask[index]
        self.next_pos = self.next_pos[index]

    def _append(self, chunks: list[list[int]], rows: torch.Tensor | None = None) -> torch.Tensor:
        """Feed each row its chunk (or, with `rows`, each of those rows), left-padded within the
        chunk so every row's last slot is real."""
        width = max(len(c) for c in chunks)
        ids = torch.full((len(chunks), width), self.engine.pad_id, dtype=torch.long)
        mask_new = torch.zeros(len(chunks), width, dtype=torch.long)
        for i, c in enumerate(chunks):  # built on the host, moved once
            if c:
                ids[i, width - len(c) :] = torch.tensor(c)
                mask_new[i, width - len(c) :] = 1
        ids, mask_new = ids.to(self.device), mask_new.to(self.device)
        start = self.next_pos if rows is None else self.next_pos[rows]
        positions = start[:, None] + (mask_new.cumsum(1) - 1).clamp(min=0)
        if rows is None:
            self.next_pos = self.next_pos + mask_new.sum(1)
        else:
            self.next_pos = self.next_pos.index_add(0, rows, mask_new.sum(1))
        return self._forward(ids, mask_new, positions, rows)

    def _zeros(self, *shape: int) -> torch.Tensor:
        return torch.zeros(shape, dtype=torch.long, device=self.device)

    def _index(self, rows: Sequence[int]) -> torch.Tensor:
        return torch.tensor(rows, dtype=torch.long, device=self.device)

    # ------------------------------------------------------------------ decoding
    def _stop_reason(self, ids: list[int], params: SamplingParams, limit: int) -> str | None:
        if ids[-1] in self.engine.eos_ids:
            return "eos"
        if params.stop_strings:
            # A stop string such as </tool_call> spans several tokens: check the decoded tail.
            tail = self.engine.tokenizer.decode(ids[-12:], skip_special_tokens=False)
            if any(s in tail for s in params.stop_strings):
                return "stop"
        if len(ids) >= limit:
            return "length"
        return None




class _Action:
    """The action a row is sampling: its tokens so far and its token limit."""

    __slots__ = ("ids", "logprobs", "limit")

    def __init__(self, limit: int):
        self.ids: list[int] = []
        self.logprobs: list[float] = []
        self.limit = limit


def _common_prefix(seqs: list[tuple[int, ...]]) -> int:
    """Length of the common prefix, leaving every sequence at least one token of its own (the
    logits of each row's last prompt token are needed)."""
    limit = min(len(s) for s in seqs) - 1
    n = 0
    while n < limit and all(s[n] == seqs[0][n] for s in seqs):
        n += 1
    return n


def _sample_per_row(logp: torch.Tensor, probs: torch.Tensor, generators: Sequence):
    """Gumbel-max with each row's own noise: argmax(log p + Gumbel) is a draw from p. A row's token
    then changes only if its two best perturbed scores are within the logits' rounding, not — as an
    inverse-CDF draw would — whenever its uniform lands that close to any of the vocabulary's cumulative
    sums; so the same episode samples the same tokens in batches of another shape. A row with no
    generator draws nothing."""
    V = logp.shape[-1]
    noise = torch.stack([-torch.empty(V).exponential_(generator=g).log() if g is not None else torch.zeros(V)
                         for g in generators]).to(logp.device)
    scores = torch.where(probs > 0, logp.float(), float("-inf")) + noise
    tokens = scores.argmax(dim=-1)
    return tokens, logp.gather(1, tokens[:, None])[:, 0]


def _sample(logits: torch.Tensor, params: SamplingParams, generator: torch.Generator | Sequence):
    """Next tokens (R,) and their logprobs (R,) under the tempered distribution. `generator`: one for
    the batch, or one per row (None: the row draws nothing and its token is not used)."""
    if params.temperature == 0:
        logp = torch.log_softmax(logits, dim=-1)
        tokens = logp.argmax(dim=-1)
        return tokens, logp.gather(1, tokens[:, None])[:, 0]
    logp = torch.log_softmax(logits / params.temperature, dim=-1)
    probs = logp.exp()
    if params.top_p < 1.0:
        sorted_p, order = probs.sort(dim=-1, descending=True)
        outside = sorted_p.cumsum(-1) - sorted_p > params.top_p
        sorted_p = sorted_p.masked_fill(outside, 0.0)
        probs = torch.zeros_like(probs).scatter(1, order, sorted_p)
    if not isinstance(generator, torch.Generator):
        return _sample_per_row(logp, probs, generator)
    # Inverse-CDF sampling: one uniform per row. torch.multinomial draws an exponential for every
    # vocabulary entry, which cost more than the model's matmuls at batch 32 here.
    cdf = probs.cumsum(dim=-1)
    u = torch.rand(probs.shape[0], 1, generator=generator, dtype=cdf.dtype).to(cdf.device) * cdf[:, -1:]
    tokens = torch.searchsorted(cdf, u)[:, 0].clamp(max=probs.shape[-1] - 1)
    return tokens, logp.gather(1, tokens[:, None])[:, 0]
