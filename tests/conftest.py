"""Shared fixtures: the real SmolLM2 tokenizer and tiny random models built on it.

Model work in tests runs single-threaded: two torch threads on two cores collapse when anything
else runs, and the tiny models gain nothing from a second thread.
"""

from __future__ import annotations

import pytest
import torch

torch.set_num_threads(1)


@pytest.fixture(scope="session")
def tokenizer():
    from agentic_rl.models.loader import load_tokenizer

    return load_tokenizer("tiny")


@pytest.fixture
def tiny(tokenizer):
    from agentic_rl.models.loader import tiny_model

    model = tiny_model(tokenizer, seed=0)
    model.eval()
    return model
