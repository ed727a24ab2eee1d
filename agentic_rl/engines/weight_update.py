"""How a served engine gets the trainer's weights: `rollout.engine.weight_update`.

Each writer takes the `ServedEngine` and puts the trainer's weights on its server (the version is
the engine's own count, `served.py`). All of them write the weights to a directory the server reads (`RUN_DIR/served/`: the server and the trainer share a
filesystem), then tell the server to load it.

- `load_weights` — `agentic-rl serve`: POST `/v1/load_weights {path}`; the server swaps the weights
  between batches.
- `vllm_reload` — vLLM, full weights, through its development-mode endpoints (the server runs with
  `VLLM_SERVER_DEV_MODE=1`): `/pause?mode=wait` (requests in flight finish on the old weights), the
  workers' in-place reload (`/collective_rpc` `reload_weights` with the checkpoint's path),
  `/reset_prefix_cache` (its KV blocks were computed by the old weights, and vLLM's block hashes do
  not know about weights), `/resume`. A LoRA policy is sent merged.
- `vllm_lora` — vLLM, LoRA adapters only, loaded at run time (the server runs with
  `VLLM_ALLOW_RUNTIME_LORA_UPDATING=True`, `--enable-lora --max-lora-rank R`): the adapter is
  loaded in place under the name `policy` (`/v1/load_lora_adapter`, `load_inplace`), requests name
  it as their model, and the prefix cache is reset. When the base weights changed (the first sync,
  or SFT's adapter merged in before RL) the base is reloaded first, as `vllm_reload` does.
- `auto` — `load_weights` when the server says its version on `/health` (ours does), else
  `vllm_reload`.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable

import torch

from agentic_rl.models.checkpoint import save_checkpoint
from agentic_rl.models.lora import is_lora

ADAPTER = "policy"  # the name the LoRA writer loads the adapter under, and requests ask for


def load_weights(engine) -> None:
    path = save_checkpoint(engine.model, engine.tokenizer, engine.weights_dir / "policy")
    engine._post("/v1/load_weights", {"path": str(path)})


def vllm_reload(engine) -> None:
    path = save_checkpoint(engine.model, engine.tokenizer, engine.weights_dir / "policy")
    _reload(engine, str(path))


def vllm_lora(engine) -> None:
    model = engine.model
    if not is_lora(model):
        raise ValueError("rollout.engine.weight_update=vllm_lora needs a LoRA policy (model.lora_rank > 0)")
    base = _fingerprint(model)
    if base != getattr(engine, "_base_fingerprint", None):
        plain = copy.deepcopy(model).unload()  # the base weights, without the adapter
        _reload(engine, str(save_checkpoint(plain, engine.tokenizer, engine.weights_dir / "base")))
        engine._base_fingerprint = base
    path = engine.weights_dir / "adapter"
    model.save_pretrained(path)  # peft: adapter_config.json + adapter_model.safetensors
    engine._post("/v1/load_lora_adapter", {"lora_name": ADAPTER, "lora_path": str(path), "load_inplace": True})
    _reset_prefix_cache(engine)
    engine.served_model = ADAPTER


def _reload(engine, path: str) -> None:
    engine._post("/pause?mode=wait&clear_cache=false", {})  # the cache is reset below, on purpose
    try:
        engine._post("/collective_rpc", {"method": "reload_weights", "kwargs": {"weights_path": path}})
        _reset_prefix_cache(engine)
    finally:
        engine._post("/resume", {})


def _reset_prefix_cache(engine, tries: int = 50) -> None:
    """vLLM refuses the reset while a running request holds blocks: try again a moment later."""
    for _ in range(tries):
        if engine._post("/reset_prefix_cache", {}).get("success", True):
            return
        time.sleep(0.1)
    raise RuntimeError(f"{engine.url} did not reset its prefix cache")


@torch.no_grad()
def _fingerprint(model) -> float:
    """A sum over the base (non-adapter) weights: changes when SFT's adapter is merged into them."""
    return float(sum(p.double().sum() for n, p in model.named_parameters() if "lora_" not in n))


WRITERS: dict[str, Callable[..., None]] = {"load_weights": load_weights, "vllm_reload": vllm_reload,
                                          "vllm_lora": vllm_lora}


def writer(name: str, health: dict) -> Callable[..., None]:
    """The writer `rollout.engine.weight_update` names; `auto` reads the server's `/health` answer."""
    if name == "auto":
        name = "load_weights" if "version" in health else "vllm_reload"
    if name not in WRITERS:
        raise ValueError(f"rollout.engine.weight_update={name!r}: one of auto, {', '.join(WRITERS)}")
    return WRITERS[name]
