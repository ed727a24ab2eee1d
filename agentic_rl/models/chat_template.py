"""A tool-capable ChatML Jinja template, installed on tokenizers whose own template has no tools.

SmolLM2's shipped template renders `content` only: it drops `tool_calls` and shows tool results as a
role nobody trained on. This template renders exactly what `agentic_rl.envs.formats.HermesFormat`
renders (a test holds them equal), so a checkpoint saved by us chats with tools in any HF tooling.
A model's own template that renders tool calls and results, in whatever syntax (Qwen's hermes
calls, Llama's JSON, Mistral's [TOOL_CALLS], Gemma's tool_code), is kept: it is the default, ours
the fallback.
"""

from __future__ import annotations

TOOL_CHATML_TEMPLATE = r"""
{%- set ns = namespace(system=default_system if default_system is defined else 'You are a helpful AI assistant named SmolLM, trained by Hugging Face', start=0) -%}
{%- if messages and messages[0]['role'] == 'system' -%}{%- set ns.system = messages[0]['content'] -%}{%- set ns.start = 1 -%}{%- endif -%}
{{- '<|im_start|>system\n' + ns.system -}}
{%- if tools -%}
{{- '\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>' -}}
{%- for tool in tools -%}{{- '\n' + (tool | tojson) -}}{%- endfor -%}
{{- '\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>' -}}
{%- endif -%}
{{- '<|im_end|>\n' -}}
{%- for message in messages[ns.start:] -%}
{%- set prev = messages[ns.start + loop.index0 - 1]['role'] if ns.start + loop.index0 > 0 else '' -%}
{%- set next = messages[ns.start + loop.index0 + 1]['role'] if not loop.last else '' -%}
{%- if message['role'] == 'assistant' -%}
{{- '<|im_start|>assistant\n' + (message['content'] or '') -}}
{%- for call in (message['tool_calls'] or []) -%}
{%- set fn = call['function'] if call['function'] is defined else call -%}
{{- '\n<tool_call>\n{"name": "' + fn['name'] + '", "arguments": ' + (fn['arguments'] if fn['arguments'] is string else (fn['arguments'] | tojson)) + '}\n</tool_call>' -}}
{%- endfor -%}
{{- '<|im_end|>\n' -}}
{%- elif message['role'] == 'tool' -%}
{%- if prev != 'tool' -%}{{- '<|im_start|>user' -}}{%- endif -%}
{{- '\n<tool_response>\n' + message['content'] + '\n</tool_response>' -}}
{%- if next != 'tool' -%}{{- '<|im_end|>\n' -}}{%- endif -%}
{%- else -%}
{{- '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n' -}}
{%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\n' -}}{%- endif -%}
"""

# The same template with a reasoning block in the style of Qwen3's: an assistant message's
# `<think>...</think>` is rendered in one canonical layout (`<think>\n...\n</think>\n\n`, then the
# reply) while it answers the latest user message, and dropped once a user speaks again. The rendering
# of the next turn then need not extend what was sampled: a sample whose reasoning was laid out
# otherwise is re-rendered, and earlier reasoning disappears; history is rewritten (docs/proxy.md,
# the `openai_reasoning` format).
REASONING_CHATML_TEMPLATE = TOOL_CHATML_TEMPLATE.replace(
    "{%- for message in messages[ns.start:] -%}",
    "{%- set last = namespace(user=-1) -%}"
    "{%- for m in messages -%}{%- if m['role'] == 'user' -%}{%- set last.user = loop.index0 -%}{%- endif -%}{%- endfor -%}"
    "{%- for message in messages[ns.start:] -%}", 1).replace(
    r"{{- '<|im_start|>assistant\n' + (message['content'] or '') -}}",
    "{%- set content = message['content'] or '' -%}"
    "{%- if '</think>' in content -%}"
    r"{%- set reasoning = content.split('</think>')[0].split('<think>')[-1].strip('\n') -%}"
    r"{%- set content = content.split('</think>')[-1].lstrip('\n') -%}"
    "{%- if ns.start + loop.index0 > last.user -%}"
    r"{%- set content = '<think>\n' + reasoning + '\n</think>\n\n' + content -%}"
    "{%- endif -%}{%- endif -%}"
    r"{{- '<|im_start|>assistant\n' + content -}}", 1)


def install_chat_template(tokenizer) -> None:
    """Give the tokenizer a tool-capable template unless its own already renders tool calls and results."""
    if not _renders_tools(tokenizer):
        tokenizer.chat_template = TOOL_CHATML_TEMPLATE


def _renders_tools(tokenizer) -> bool:
    if not tokenizer.chat_template:
        return False
    # an id as long as Mistral's templates ask for; arguments as a mapping, as HF templates index into
    call = {"id": "probecall", "type": "function", "function": {"name": "probe_fn", "arguments": {"probe_arg": 7}}}
    probe = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "name": "probe_fn", "tool_call_id": "probecall", "content": "probe_result"},
    ]
    try:
        text = tokenizer.apply_chat_template(probe, tokenize=False)
    except Exception:  # templates raise arbitrary errors on roles they do not know
        return False
    return all(s in text for s in ("probe_fn", "probe_arg", "probe_result"))
