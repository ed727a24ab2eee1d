"""Memory guard: estimate what RL will hold before it starts, fit the run to the machine where it can
(`plan_memory`), and otherwise stop with a clear message (and the knobs that shrink it) instead of
being killed by the OOM killer an hour in.

The estimate, in bytes, for P parameters (P_t of them trainable), vocabulary V, hidden size H and
L layers, with the largest micro-batch (k = max(1, micro_batch_rows // G) groups, each a prompt of
p tokens shared by its G rows; R = kG rows, each at most E generated tokens and O observation tokens;
with a token bound on micro-batches, `rl.optim.micro_batch_tokens`, R is the rows that fit in it,
at least one):

    weights 4P  +  gradients 4P_t  +  AdamW moments 8P_t
    +  a frozen reference 4P (KL on a full fine-tune)  +  a critic model 16P  +  the sampler's bf16 copy 2P
    +  4P per distillation teacher (an upper bound for LoRA-adapter teachers, which share one base)
    +  autocast's bf16 casts of the weights 2P (kept for the backward)  +  0.5 GiB for the runtime
    +  with checkpoint.async_save, the state copy a background write holds: 4P + 8P_t (+ 12P a critic model)
    +  the larger of the update's and the sampler's transient memory (both, when rollouts overlap the
       update: rl.max_staleness > 0):
       the update's activations  (k*p + R*(E + O)) * L * 34H * 2  +  the vocabulary term of R*E tokens
       (+ the same layer term again for a critic model's own pass; + R*E * 4V for the teachers' logits)
       the sampler's KV cache  D * (p + E + O) * 2 * L * H_kv * d * b * KV_SPARE  for D episodes decoding at once
       (`rollout.max_concurrent`, else a step's tasks x G), H_kv key-value heads of width d, b bytes in
       the sampler's dtype, times KV_SPARE = 3: a buffer's capacity doubles when full, on a width that
       keeps up to a quarter of padding columns before they are dropped (`engines/kv_cache.py`, `hf.py`)

The layer term is Korthikanti et al. (2022)'s 34·H bytes per token per layer for 16-bit
activations, doubled for fp32; with `model.gradient_checkpointing` it is L·4H (each layer's fp32
input) plus one layer's 34·H·2, recomputed in the backward, for the rows' own tokens; the shared
prompt (one row) is not checkpointed. The prompt counts once: the trainer forwards a group's shared prefix
once and repeats its KV cache (`models/forward.py`). Only sampled tokens are turned into logits, so
the vocabulary term covers E tokens a row: the chunked projection (`models/vocab.py`) keeps the logits,
4V bytes a token at most (0.20 MB for SmolLM2-135M), up to `KEEP_LOGITS_BYTES`, and past that only
one chunk's working set (CHUNK x 12V: the logits, their fp32 copy and the gradient); on-policy
distillation's plain projection keeps the logits, their log-softmax and its gradient in fp32 (12V,
0.59 MB a token). The layer term is 1.17 MB per token. p is measured on a training task; E is the whole
generated-token budget and O allows 48 tokens per tool turn, the worst case. The runtime allowance
covers Python, torch and the allocator's slack (a process with torch and transformers imported holds
0.23 GiB). The run logs its measured peak (`mem_peak_rss_gb`) beside the estimate (`memory_estimate`
event) to compare.
"""

from __future__ import annotations

import ctypes
import gc
import os
import resource
import sys
import time
import warnings
from dataclasses import dataclass, replace
from pathlib import Path

import torch

from agentic_rl.errors import UserError
from agentic_rl.models.device import device_of
from agentic_rl.models.precision import inference_dtype
from agentic_rl.models.vocab import CHUNK, KEEP_LOGITS_BYTES

GB = 1024**3
OBSERVATION_TOKENS = 48  # allowance per tool turn
RUNTIME_BYTES = GB // 2
KV_SPARE = 3  # capacity doubles when full (2x), on a width with up to a quarter of padding columns (4/3)
TRANSIENT = ("activations", "critic_activations", "teacher_logits", "sampler_kv")  # not held all the time


class MemoryBudgetError(UserError, ValueError):
    """The RL stage would need more memory than the machine has available."""


@dataclass(frozen=True)
class RLShape:
    """What the estimate needs to know of an RL run besides the model."""

    group_size: int
    micro_batch_rows: int
    max_episode_tokens: int
    max_turns: int
    precision: str  # model.precision
    reference: bool  # a frozen copy of the policy (a KL term on a full fine-tune)
    critic_model: bool  # a critic with its own transformer
    teachers: int  # on-policy distillation teachers
    full_vocab: bool  # the plain projection (an entropy bonus or teachers): 12V bytes a trained token, not 4V
    gradient_checkpointing: bool = False
    async_save: bool = False  # a background state write's host copy
    shards: int = 1  # ranks the policy is sharded over (model.parallel: fsdp): weights, gradients, moments split
    micro_batch_tokens: int = 0  # a bound on a micro-batch's tokens (rl.optim.micro_batch_tokens); 0: by rows
    decoding: int = 0  # episodes decoding at once, each with its KV cache; 0: not counted
    overlapped: bool = False  # rollouts run while the update does (rl.max_staleness > 0)


def estimate_rl_bytes(model, shape: RLShape, prompt_tokens: int = 512) -> dict[str, float]:
    conf = model.config
    P = sum(p.numel() for p in model.parameters())
    P_t = sum(p.numel() for p in model.parameters() if p.requires_grad)
    full = conf.num_hidden_layers * 34 * conf.hidden_size * 2  # bytes per token through the layers
    # checkpointed: each layer's fp32 input kept, one layer's activations live at a time
    hidden = conf.num_hidden_layers * 4 * conf.hidden_size + 34 * conf.hidden_size * 2 \
        if shape.gradient_checkpointing else full
    groups, rows = micro_batch_rows(shape, prompt_tokens)
    generated = rows * shape.max_episode_tokens  # the tokens turned into logits
    body = rows * row_tokens(shape.max_episode_tokens, shape.max_turns)
    dtype = inference_dtype(shape.precision, device_of(model))  # the sampler's and autocast's
    S = shape.shards
    parts = {
        "weights": 4 * P // S,
        "gathered_layers": 2 * 4 * P // conf.num_hidden_layers if S > 1 else 0,  # a layer in use, the next one
        "gradients": 4 * P_t // S,
        "adam_moments": 8 * P_t // S,
        "reference": 4 * P if shape.reference else 0,
        "critic_model": 16 * P if shape.critic_model else 0,
        # a sharded policy's sampler holds a whole copy, in fp32 too
        "sampler_copy": 2 * P if dtype != model.dtype else (4 * P if S > 1 else 0),
        "autocast_copy": 2 * P_t // S if dtype == torch.bfloat16 != model.dtype else 0,
        "runtime": RUNTIME_BYTES,
        "teachers": 4 * P * shape.teachers,
        # the copy an asynchronous state write holds while training goes on: weights and moments
        "state_copy": (4 * P + 8 * P_t + (12 * P if shape.critic_model else 0)) if shape.async_save else 0,
        # the shared prompt runs un-checkpointed (one row), the rows' own tokens as configured
        "activations": groups * prompt_tokens * full + body * hidden + vocab_term(generated, conf.vocab_size, shape),
        "critic_activations": (groups * prompt_tokens + body) * full if shape.critic_model else 0,
        "teacher_logits": generated * 4 * conf.vocab_size if shape.teachers else 0,
        "sampler_kv": shape.decoding * (prompt_tokens + row_tokens(shape.max_episode_tokens, shape.max_turns))
        * kv_bytes_per_token(conf, dtype) * KV_SPARE,
    }
    return {k: float(v) for k, v in parts.items()}


def peak_bytes(parts: dict[str, float], shape: RLShape) -> float:
    """What the run holds at its peak: everything held throughout, and the larger of the update's
    transient memory and the sampler's KV cache (their sum when rollouts overlap the update)."""
    update = sum(parts.get(k, 0.0) for k in TRANSIENT[:-1])
    kv = parts.get("sampler_kv", 0.0)
    held = sum(v for k, v in parts.items() if k not in TRANSIENT)
    return held + (update + kv if shape.overlapped else max(update, kv))


def row_tokens(max_episode_tokens: int, max_turns: int = 1) -> int:
    """A row's own tokens at most: its generated-token budget and its observations."""
    return max_episode_tokens + OBSERVATION_TOKENS * (max_turns - 1)


def micro_batch_rows(shape: RLShape, prompt_tokens: int) -> tuple[int, int]:
    """(groups, rows) of the largest micro-batch: whole groups up to `micro_batch_rows`, or, with a
    token bound, the rows that fit in it (at least one; the update cuts a larger group into parts
    of rows, each forwarding the prompt)."""
    G = shape.group_size
    groups = max(1, shape.micro_batch_rows // G)  # small groups share a micro-batch
    rows = groups * G
    if shape.micro_batch_tokens:
        fit = (shape.micro_batch_tokens - prompt_tokens) // row_tokens(shape.max_episode_tokens, shape.max_turns)
        if fit < rows:
            rows = max(1, fit)
            groups = max(1, rows // G)
    return groups, rows


def micro_batch_tokens(group_size: int, micro_batch_rows: int, max_episode_tokens: int, max_turns: int = 1,
                       prompt_tokens: int = 512) -> int:
    """The tokens of the largest micro-batch the estimate holds activations for: each group's prompt
    once, and every row's generated-token budget plus its observations. A packed update fills its
    micro-batches up to this many tokens (`rl.optim.micro_batch_tokens: 0`), so it holds no more."""
    groups = max(1, micro_batch_rows // group_size)
    rows = groups * group_size
    return groups * prompt_tokens + rows * row_tokens(max_episode_tokens, max_turns)


def kv_bytes_per_token(conf, dtype: torch.dtype) -> int:
    """A token's keys and values over every layer, in `dtype`."""
    heads = getattr(conf, "num_key_value_heads", None) or conf.num_attention_heads
    head_dim = getattr(conf, "head_dim", None) or conf.hidden_size // conf.num_attention_heads
    return 2 * conf.num_hidden_layers * heads * head_dim * torch.finfo(dtype).bits // 8


def vocab_term(tokens: int, vocab: int, shape: RLShape) -> int:
    """Bytes the vocabulary projection of `tokens` trained tokens holds until the backward pass."""
    if shape.full_vocab:
        return tokens * 12 * vocab
    kept = tokens * 4 * vocab  # fp32, the larger case
    return kept if kept <= KEEP_LOGITS_BYTES else CHUNK * 12 * vocab


def available_bytes(device: torch.device | None = None) -> float | None:
    """Free memory of the model's CUDA device, or MemAvailable from /proc/meminfo (Linux) for the
    host; None where unknown."""
    if device is not None and device.type == "cuda":
        return float(torch.cuda.mem_get_info(device)[0])
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return float(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def rss_gb() -> float:
    """The process's resident memory now (/proc/self/statm; the peak where that is not readable)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / GB
    except (OSError, ValueError, IndexError):
        return peak_rss_gb()


def peak_rss_gb() -> float:
    """The process's peak resident memory so far (ru_maxrss: KiB on Linux, bytes on macOS)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (GB if sys.platform == "darwin" else 1024**2)


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks",
                 "keepcost")]


def _libc(symbol: str):
    """A function of the process's C library, None where it has none of that name (not glibc)."""
    try:
        return getattr(ctypes.CDLL(None), symbol)
    except (AttributeError, OSError):
        return None


def heap_gb() -> dict[str, float]:
    """glibc malloc's own account (mallinfo2, over every arena): what it has handed out and not had
    back (`mem_heap_used_gb`, its mmapped chunks included) and the free chunks it keeps inside its
    heaps (`mem_heap_free_gb`), resident until trimmed. Empty off glibc (or before 2.33)."""
    fn = _libc("mallinfo2")
    if fn is None:
        return {}
    fn.restype = _MallInfo2
    m = fn()
    return {"mem_heap_used_gb": (m.uordblks + m.hblkhd) / GB, "mem_heap_free_gb": m.fordblks / GB}


def release_free_memory() -> bool:
    """Give the pages of malloc's free chunks back to the system (glibc's malloc_trim(0), every
    arena); False where there is no such call. What is live is untouched: this changes what the
    process holds, never what it computes."""
    fn = _libc("malloc_trim")
    if fn is None:
        return False
    fn.argtypes, fn.restype = [ctypes.c_size_t], ctypes.c_int
    fn(0)
    return True


def live_objects() -> dict[str, float]:
    """What the garbage collector reaches: torch tensors (`mem_tensors`; `mem_tensor_gb`, the bytes
    of their distinct storages) and every gc-tracked object (`mem_gc_objects`). Counts that grow
    from step to step are references held (a leak); a resident size that grows while they stay flat
    is the allocator's. Collects the garbage first (what only a cycle holds is not live), then walks
    every object: 1.6 s for the 354k objects of a training process on the shared 2-core machine."""
    gc.collect()
    objects = gc.get_objects()
    storages: dict[int, int] = {}
    with warnings.catch_warnings():  # isinstance reads __class__, which some deprecated objects warn on
        warnings.simplefilter("ignore")
        found = [o for o in objects if isinstance(o, torch.Tensor)]
    for t in found:
        if t.device.type != "meta":
            s = t.untyped_storage()
            storages[s.data_ptr()] = s.nbytes()
    return {"mem_tensors": float(len(found)), "mem_tensor_gb": sum(storages.values()) / GB,
            "mem_gc_objects": float(len(objects))}


def step_memory(release: bool, census: bool) -> dict[str, float]:
    """An RL step's memory row, taken at its end: the peak so far, then (with `release`) malloc's free
    pages given back (`time_release_s`: how long that took), the resident size and malloc's account,
    and with `census` the live objects."""
    peak = peak_rss_gb()
    t0 = time.perf_counter()
    released = release and release_free_memory()
    return {"mem_peak_rss_gb": peak, **({"time_release_s": time.perf_counter() - t0} if released else {}),
            "mem_rss_gb": rss_gb(), **heap_gb(), **(live_objects() if census else {})}


def check_memory(model, shape: RLShape, prompt_tokens: int = 512, available: float | None = None,
                 enforce: bool = True) -> dict[str, float]:
    """The estimate in GiB (with what is available); raises MemoryBudgetError when it does not fit
    (unless not `enforce`: model.memory_check false)."""
    parts = estimate_rl_bytes(model, shape, prompt_tokens)
    total = peak_bytes(parts, shape)
    available = available_bytes(device_of(model)) if available is None else available
    report = {f"mem_{k}_gb": round(v / GB, 3) for k, v in parts.items() if v}
    report["mem_estimate_gb"] = round(total / GB, 3)
    if available is not None:
        report["mem_available_gb"] = round(available / GB, 3)
    if enforce and available is not None and total > available:
        biggest = max(parts, key=parts.get)
        raise MemoryBudgetError(
            f"RL needs about {total / GB:.1f} GiB but {available / GB:.1f} GiB are available "
            f"(largest part: {biggest}, {parts[biggest] / GB:.1f} GiB). Lower rl.tasks.group_size or "
            "rollout.max_episode_tokens, train LoRA (model.lora_rank), or set model.memory_check: false "
            "to try anyway.")
    return report


def plan_memory(model, shape: RLShape, prompt_tokens: int, available: float | None) -> tuple[RLShape, dict]:
    """The run fitted to `available` bytes when its estimate exceeds them (`model.memory_plan`), each
    step only if the one before does not suffice: (1) gradient checkpointing on; (2) a token bound on
    micro-batches (`rl.optim.micro_batch_tokens`), the most rows of a group that fit, one at least;
    (3) fewer episodes decoding at once (`rollout.max_concurrent`), whole groups where one fits.
    Returns the shape and the recipe values that make it ({} when it fits as it is, or no memory is
    known); what still does not fit is `check_memory`'s to refuse."""
    def fits(s: RLShape) -> bool:
        return peak_bytes(estimate_rl_bytes(model, s, prompt_tokens), s) <= available

    if available is None or fits(shape):
        return shape, {}
    values: dict = {}
    if not shape.gradient_checkpointing:
        shape, values["model.gradient_checkpointing"] = replace(shape, gradient_checkpointing=True), True
        if fits(shape):
            return shape, values
    _, rows = micro_batch_rows(shape, prompt_tokens)
    own = row_tokens(shape.max_episode_tokens, shape.max_turns)
    if not fits(replace(shape, decoding=0, overlapped=False)):  # the update alone does not fit
        for r in range(rows - 1, 0, -1):
            trial = replace(shape, micro_batch_tokens=prompt_tokens + r * own)
            if fits(replace(trial, decoding=0, overlapped=False)) or r == 1:
                shape, values["rl.optim.micro_batch_tokens"] = trial, trial.micro_batch_tokens
                break
    for d in range(shape.decoding - 1 if not fits(shape) else 0, 0, -1):
        if fits(replace(shape, decoding=d)) or d == 1:
            d = d - d % shape.group_size if d >= shape.group_size else d  # whole groups share a prefill
            shape, values["rollout.max_concurrent"] = replace(shape, decoding=d), d
            break
    return shape, values
