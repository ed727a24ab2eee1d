"""LoRA through peft. The KL reference of a LoRA policy is the same model with adapters disabled:
no second copy of the weights in memory.

Between SFT and RL the SFT adapter is merged into the base weights and a fresh adapter is added, so
"adapters disabled" is then the SFT model (base + SFT adapter), the reference RL should stay near.
"""

from __future__ import annotations

import contextlib


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
