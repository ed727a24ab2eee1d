"""LoRA through peft. The KL reference of a LoRA policy is the same model with adapters disabled:
no second copy of the weights in memory.

Between SFT and RL the SFT adapter is merged into the base weights and a fresh adapter is added, so
"adapters disabled" is then the SFT model (base + SFT adapter), the reference RL should stay near.
"""

from __future__ import annotations

import contextlib

import torch


def apply_lora(model, rank: int, alpha: int):
    from peft import LoraConfig, get_peft_model

    config = LoraConfig(r=rank, lora_alpha=alpha, lora_dropout=0.0, task_type="CAUSAL_LM",
                        target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"])
    return get_peft_model(model, config)


def is_lora(model) -> bool:
    return hasattr(model, "disable_adapter") and hasattr(model, "peft_config")


def reference_context(model):
    """Context in which `model` computes reference logprobs (adapters off), or a no-op."""
    return model.disable_adapter() if is_lora(model) else contextlib.nullcontext()


def start_rl_adapter(model, rank: int, alpha: int):
    """Merge the trained (SFT) adapter into the weights and wrap them in a fresh one for RL. The fresh
    adapter starts as the identity (peft zero-initialises B), so the policy is unchanged and its
    reference is the SFT model."""
    return apply_lora(model.merge_and_unload(), rank, alpha) if is_lora(model) else model


def mergeable(model) -> bool:
    """A LoRA policy whose adapters are plain low-rank updates (no DoRA), so base + B·A·scale is
    the whole layer and a merged copy computes exactly what the adapted model computes."""
    from peft.tuners.lora import LoraLayer

    layers = [m for m in model.modules() if isinstance(m, LoraLayer)]
    return bool(layers) and not any(any(m.use_dora.values()) for m in layers)


class MergedWeights:
    """Writes a LoRA policy's merged weights into a plain model of the same architecture, name for
    name: base + the B·A·scale of every active adapter, summed in the policy's dtype and cast once.

    The sampling engine decodes with such a copy: an unmerged adapter adds two small matmuls to
    every projection of every decoded token (rank 16 on SmolLM2: 1.12x the merged copy's decoding
    time, benchmarks/bench_lora_rollout.py)."""

    def __init__(self, model):
        from peft.tuners.lora import LoraLayer

        inner = model.get_base_model()
        self.layers = {f"{name}.weight": m for name, m in inner.named_modules() if isinstance(m, LoraLayer)}
        self.plain = {name.replace(".base_layer.", "."): p for name, p in inner.named_parameters() if "lora_" not in name}

    @torch.no_grad()
    def write(self, target) -> None:
        for name, p in target.named_parameters():
            layer = self.layers.get(name)
            if layer is None:
                p.copy_(self.plain[name])
                continue
            merged = layer.get_base_layer().weight.clone()
            for adapter in layer.active_adapters:
                if adapter in layer.lora_A and not layer.disable_adapters:
                    merged += layer.get_delta_weight(adapter)
            p.copy_(merged)
