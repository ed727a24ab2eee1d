"""Each model family's own tool-call format: its chat template (`family_templates.py`) for what the
model reads, its call syntax (`calls.py`) for what it writes, matching vLLM's tool parser for it.

  qwen2_5      Qwen2.5: hermes `<tool_call>` JSON in ChatML with Qwen's system prompt
  qwen3        Qwen3: the same with its reasoning layout; the template rewrites history (`history: template`)
  llama3_json  Llama 3.1+: `{"name": ..., "parameters": {...}}<|eot_id|>`, results in `ipython` turns
  mistral      Mistral v3: `[TOOL_CALLS] [{"name": ..., "arguments": {...}}]</s>`, `[TOOL_RESULTS]`
  gemma3       Gemma 3: a ```tool_code``` block of Python calls, results in ```tool_output``` blocks

The Llama, Mistral and Gemma calls have no closing tag of their own: an action that calls a tool ends with the turn's
end marker (`call_end`), and generation stops there. Where that marker is one token of the vocabulary
(the family's own tokenizer) the engine stops at it as end-of-sequence; elsewhere (SmolLM2, which has
none of these tokens) it is a stop string, and the rollout counts an action that ends with it as
closed all the same, so the glue after it never repeats it.
"""

from __future__ import annotations

from agentic_rl.envs.formats.calls import LlamaJsonCalls, MistralCalls, PythonicCalls
from agentic_rl.envs.formats.chat_template import ChatTemplateFormat
from agentic_rl.envs.formats.family_templates import (
    GEMMA3_TEMPLATE,
    LLAMA3_JSON_TEMPLATE,
    MISTRAL_TEMPLATE,
    QWEN2_5_TEMPLATE,
    QWEN3_TEMPLATE,
)


def _family(name: str, template: str, end: str, calls, stops: tuple[str, ...] = ()) -> ChatTemplateFormat:
    return ChatTemplateFormat(template, name, stop_strings=(end, *stops), end_of_turn=end, calls=calls,
                              call_end=end, json_arguments=False)


# <|eom_id|>: what Llama writes after a call in `Environment: ipython`; a stop, never rendered
LLAMA3_JSON = _family("llama3_json", LLAMA3_JSON_TEMPLATE, "<|eot_id|>", LlamaJsonCalls(), ("<|eom_id|>",))
MISTRAL = _family("mistral", MISTRAL_TEMPLATE, "</s>", MistralCalls())
GEMMA3 = _family("gemma3", GEMMA3_TEMPLATE, "<end_of_turn>", PythonicCalls())

# Qwen's calls end with </tool_call>, a stop string, and its turns with <|im_end|> (SmolLM2's too)
QWEN2_5 = ChatTemplateFormat(QWEN2_5_TEMPLATE, "qwen2_5", json_arguments=False)
QWEN3 = ChatTemplateFormat(QWEN3_TEMPLATE, "qwen3", json_arguments=False, history="template")
