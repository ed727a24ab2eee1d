"""LoRA through peft. The KL reference of a LoRA policy is the same model with adapters disabled:
no second copy of the weights in memory."""

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
