"""A run in a model family's format saves that family's chat template with every checkpoint, so the
checkpoint is prompted as it was trained (by our server, or vLLM with the family's tool parser)."""

from __future__ import annotations

import pytest
from transformers import AutoTokenizer

from agentic_rl.envs.formats import get_format
from agentic_rl.models.checkpoint import save_checkpoint
from agentic_rl.trainer.config import load_config
from agentic_rl.trainer.loop import prepare


@pytest.mark.parametrize("fmt", ["llama3_json", "mistral", "qwen3"])
def test_the_checkpoint_carries_the_format_it_was_trained_in(fmt, tmp_path):
    cfg = load_config("recipes/tiny.yaml", [f"env.options.format={fmt}"])
    model, tokenizer, spec = prepare(cfg)
    template = get_format(fmt).template
    assert tokenizer.chat_template == template
    saved = AutoTokenizer.from_pretrained(save_checkpoint(model, tokenizer, tmp_path / "ckpt"))
    assert saved.chat_template == template
    task = spec.tasks("train", 1, 0)[0]
    env = spec.make_env(cfg.env.options)
    messages = env.reset(task)
    rendered = saved.apply_chat_template(messages, tools=env.tool_schemas, tokenize=False, add_generation_prompt=True)
    # what the rollout fed the policy; Hugging Face's rendering also opens with the tokenizer's BOS,
    # which the family templates render and the rollout's text (encoded without special tokens) lacks
    bos = saved.bos_token if "bos_token" in template else ""
    assert rendered == bos + env.format.render_prompt(messages, env.tool_schemas)


def test_a_hermes_run_keeps_the_tool_chatml_template():
    from agentic_rl.models.chat_template import TOOL_CHATML_TEMPLATE

    _, tokenizer, _ = prepare(load_config("recipes/tiny.yaml"))
    assert tokenizer.chat_template == TOOL_CHATML_TEMPLATE
