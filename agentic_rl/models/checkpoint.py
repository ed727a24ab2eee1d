"""Checkpoints: a Hugging Face directory (model + tokenizer), written atomically (temp dir + rename).

A LoRA policy is saved merged (a copy of it with the adapter folded into the weights), so every
checkpoint loads the same way in `train`, `eval` and any Hugging Face tool.
"""

from __future__ import annotations

import copy
import os
import shutil
import tempfile
from pathlib import Path

from agentic_rl.models import sharding
from agentic_rl.models.lora import is_lora


def save_checkpoint(model, tokenizer, path: Path, state: dict | None = None) -> Path:
    """The model as a Hugging Face checkpoint at `path` (written whole, then moved in place). A
    sharded policy's whole weights are `state` (`sharding.full_state_dict`, which every rank calls),
    gathered here when not given."""
    if state is None and sharding.root(model) is not None:
        state = sharding.full_state_dict(model)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}-", dir=path.parent))
    try:
        if is_lora(model):
            model = copy.deepcopy(model).merge_and_unload()
        model.save_pretrained(tmp, state_dict=state)
        tokenizer.save_pretrained(tmp)
        if path.exists():
            shutil.rmtree(path)
        os.replace(tmp, path)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return path
