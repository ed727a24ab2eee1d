"""Checkpoints: a Hugging Face directory (model + tokenizer), written atomically (temp dir + rename)."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path


def save_checkpoint(model, tokenizer, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}-", dir=path.parent))
    try:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        if path.exists():
            shutil.rmtree(path)
        os.replace(tmp, path)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return path
